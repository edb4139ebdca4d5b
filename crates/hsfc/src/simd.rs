//! Which vector instructions the passes use: the best the processor has, or the one named by
//! the environment variable [`ENV`] (`HSFC_SIMD=scalar|avx2|avx512`), so that a machine with
//! AVX-512 can be measured as one without it would run.
//!
//! Every path runs the same operations on the same integers, so every path gives the same
//! keys and the same parts (the tests check each against [`Simd::Scalar`]).

use std::sync::OnceLock;

/// The environment variable that chooses the path: `scalar`, `avx2` or `avx512` (unset or
/// empty: the best the processor has).
pub const ENV: &str = "HSFC_SIMD";

/// A set of vector instructions the passes may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Simd {
    /// The baseline of the target (SSE2 on x86-64): no gathers; the 3-D keys walk the table
    /// eight points at a time.
    Scalar,
    /// AVX2: 8-lane gathers for the 3-D keys, 256-bit vectors elsewhere.
    Avx2,
    /// AVX-512F: 16-lane gathers for the 3-D keys.
    Avx512,
}

/// Why [`ENV`] names no path this processor can take.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SimdError {
    /// The value is none of the names.
    #[error("{ENV}={value}: unknown (scalar, avx2 or avx512)")]
    Unknown {
        /// The value given.
        value: String,
    },
    /// The processor lacks the instructions of the path named.
    #[error("{ENV}={}: this processor lacks it (best here: {})", .asked.name(), .best.name())]
    Unsupported {
        /// The path named.
        asked: Simd,
        /// The best path this processor has.
        best: Simd,
    },
}

impl Simd {
    /// Every path, from the baseline up.
    pub const ALL: [Simd; 3] = [Simd::Scalar, Simd::Avx2, Simd::Avx512];

    /// Its name in [`ENV`] (and in the benchmarks' reports).
    pub fn name(self) -> &'static str {
        match self {
            Simd::Scalar => "scalar",
            Simd::Avx2 => "avx2",
            Simd::Avx512 => "avx512",
        }
    }

    /// The path of that name.
    pub fn from_name(name: &str) -> Option<Simd> {
        Simd::ALL.into_iter().find(|s| s.name() == name)
    }

    /// Whether this processor has the instructions of this path.
    pub fn supported(self) -> bool {
        match self {
            Simd::Scalar => true,
            #[cfg(target_arch = "x86_64")]
            Simd::Avx2 => std::arch::is_x86_feature_detected!("avx2"),
            #[cfg(target_arch = "x86_64")]
            Simd::Avx512 => std::arch::is_x86_feature_detected!("avx512f"),
            #[cfg(not(target_arch = "x86_64"))]
            _ => false,
        }
    }

    /// The best path this processor has.
    pub fn detected() -> Simd {
        Simd::ALL
            .into_iter()
            .rev()
            .find(|s| s.supported())
            .unwrap_or(Simd::Scalar)
    }

    /// The path [`ENV`] asks for: `None` when it is unset or empty, an error when it names
    /// no path or one this processor lacks. Commands call it first, to refuse a bad value.
    pub fn from_env() -> Result<Option<Simd>, SimdError> {
        let Some(value) = std::env::var_os(ENV) else {
            return Ok(None);
        };
        let value = value.to_string_lossy();
        if value.is_empty() {
            return Ok(None);
        }
        let asked = Simd::from_name(&value).ok_or_else(|| SimdError::Unknown {
            value: value.into_owned(),
        })?;
        if !asked.supported() {
            return Err(SimdError::Unsupported {
                asked,
                best: Simd::detected(),
            });
        }
        Ok(Some(asked))
    }

    /// The path the passes take, chosen once per process: the one [`ENV`] names, else the
    /// best the processor has. A value [`Simd::from_env`] refuses is ignored here (the best
    /// path runs: a library does not fail on its environment); the `hsfc` command refuses it.
    pub fn active() -> Simd {
        static ACTIVE: OnceLock<Simd> = OnceLock::new();
        *ACTIVE.get_or_init(|| {
            Simd::from_env()
                .ok()
                .flatten()
                .unwrap_or_else(Simd::detected)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_errors_name_the_variable() {
        for s in Simd::ALL {
            assert_eq!(Simd::from_name(s.name()), Some(s));
        }
        assert_eq!(Simd::from_name("AVX2"), None);
        assert!(Simd::Scalar.supported());
        assert!(Simd::detected().supported());
        assert!(Simd::active().supported());
        let e = SimdError::Unsupported {
            asked: Simd::Avx512,
            best: Simd::Avx2,
        };
        assert_eq!(
            e.to_string(),
            "HSFC_SIMD=avx512: this processor lacks it (best here: avx2)"
        );
    }
}
