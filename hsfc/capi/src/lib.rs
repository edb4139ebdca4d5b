//! C ABI of `hsfc` (header `hsfc/capi/include/hsfc.h`).
#![deny(missing_docs)]
