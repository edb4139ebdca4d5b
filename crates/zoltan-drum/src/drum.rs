//! drum.h (to do)
