//! Zoltan's parameters, parsed once at `Zoltan_Set_Param` into typed values (no string
//! dispatch later). Names are case-insensitive and values of Zoltan's own parameters too
//! (Zoltan upper-cases both); `DEFAULT` restores a parameter's default. An unknown name or a
//! bad value is `ZOLTAN_WARN` with a message, and the parameter keeps (bad value: returns to)
//! its default, as in Zoltan; an unknown or unsupported `LB_METHOD` is `ZOLTAN_FATAL`.

/// `LB_METHOD`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Method {
    Hsfc,
    Rcb,
    Rib,
    /// Along the machine tree of `DRUM_MACHINE_FILE`, each level with its `<lbmethod>`.
    Hier,
    /// No partitioning: nothing moves.
    None,
}

impl Method {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Method::Hsfc => "HSFC",
            Method::Rcb => "RCB",
            Method::Rib => "RIB",
            Method::Hier => "HIER",
            Method::None => "NONE",
        }
    }
}

/// `RETURN_LISTS`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReturnLists {
    All,
    Import,
    Export,
    /// Every local object with its new part and process, in the export lists.
    Parts,
    None,
}

/// Methods Zoltan has that this library does not implement.
const OTHER_ZOLTAN_METHODS: [&str; 12] = [
    "BLOCK",
    "CYCLIC",
    "RANDOM",
    "GRAPH",
    "HYPERGRAPH",
    "PHG",
    "PARMETIS",
    "SCOTCH",
    "REFTREE",
    "OCTPART",
    "PATOH",
    "ZOLTAN_HG",
];

/// Parameters Zoltan knows that are accepted and have no effect here (their meaning is
/// Zoltan-internal output, timing, or tuning of its own algorithms); README lists them.
pub(crate) const ACCEPTED_WITHOUT_EFFECT: [&str; 22] = [
    "DEBUG_PROCESSOR",
    "DEBUG_MEMORY",
    "TIMER",
    "DETERMINISTIC",
    "TFLOPS_SPECIAL",
    "SEED",
    "EDGE_WEIGHT_DIM",
    "COMM_WEIGHT_DIM",
    "REMAP",
    "CHECK_GEOM",
    "REDUCE_DIMENSIONS",
    "DEGENERATE_RATIO",
    "FINAL_OUTPUT",
    "AVERAGE_CUTS",
    "RCB_OUTPUT_LEVEL",
    "RCB_REUSE",
    "RCB_LOCK_DIRECTIONS",
    "RCB_SET_DIRECTIONS",
    "RCB_MAX_ASPECT_RATIO",
    "RCB_MULTICRITERIA_NORM",
    "RIB_OUTPUT_LEVEL",
    "OBJ_WEIGHTS_COMPARABLE",
];

/// Every parameter, typed. `Default` is Zoltan's defaults.
#[derive(Debug, Clone)]
pub(crate) struct Params {
    pub method: Method,
    pub num_gid: usize,
    pub num_lid: usize,
    pub obj_weight_dim: usize,
    pub return_lists: ReturnLists,
    pub imbalance_tol: f64,
    pub keep_cuts: bool,
    pub num_global_parts: Option<usize>,
    pub num_local_parts: Option<usize>,
    pub debug_level: i64,
    pub rectilinear_blocks: bool,
    pub migrate_only_proc_changes: bool,
    pub auto_migrate: bool,
    pub use_drum: bool,
    pub drum_machine_file: Option<String>,
    pub drum_monitoring: bool,
    pub drum_w_comm: f64,
    pub drum_period_ms: u64,
    /// What the application set, in order (names upper-cased), for `DEBUG_LEVEL >= 1`.
    pub given: Vec<(String, String)>,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            method: Method::Rcb,
            num_gid: 1,
            num_lid: 1,
            obj_weight_dim: 0,
            return_lists: ReturnLists::All,
            imbalance_tol: 1.1,
            keep_cuts: false,
            num_global_parts: None,
            num_local_parts: None,
            debug_level: 1,
            rectilinear_blocks: false,
            migrate_only_proc_changes: true,
            auto_migrate: false,
            use_drum: false,
            drum_machine_file: None,
            drum_monitoring: false,
            drum_w_comm: 0.0,
            drum_period_ms: 50,
            given: Vec::new(),
        }
    }
}

/// Why a parameter was not taken.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum ParamError {
    /// `ZOLTAN_WARN`: no such parameter.
    Unknown { name: String, value: String },
    /// `ZOLTAN_WARN`: a bad value; the default is used.
    Invalid {
        name: String,
        value: String,
        expected: &'static str,
    },
    /// `ZOLTAN_FATAL`: a method this library does not implement, or no method at all.
    Method(String),
}

impl std::fmt::Display for ParamError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ParamError::Unknown { name, value } => {
                write!(f, "parameter `{name}' not found; not reset to `{value}'")
            }
            ParamError::Invalid {
                name,
                value,
                expected,
            } => write!(
                f,
                "invalid value `{value}' for parameter `{name}' (expected {expected}); the \
                 default value will be used"
            ),
            ParamError::Method(m) => f.write_str(m),
        }
    }
}

/// What setting a parameter changed, for the caller to act on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Changed {
    /// A parameter of the DRUM set (`USE_DRUM`, `DRUM_*`): the DRUM state is rebuilt.
    Drum,
    /// Anything else.
    Other,
}

fn flag(v: &str) -> Option<bool> {
    match v.parse::<i64>() {
        Ok(0) => Some(false),
        Ok(_) => Some(true),
        Err(_) => match v {
            "TRUE" => Some(true),
            "FALSE" => Some(false),
            _ => None,
        },
    }
}

impl Params {
    /// Sets one parameter (Zoltan's `Zoltan_Set_Param`).
    pub(crate) fn set(&mut self, name: &str, value: &str) -> Result<Changed, ParamError> {
        let name = name.trim().to_ascii_uppercase();
        let raw = value.trim();
        let v = raw.to_ascii_uppercase();
        let default = Params::default();
        let reset = v == "DEFAULT";
        let invalid = |expected| ParamError::Invalid {
            name: name.clone(),
            value: raw.to_string(),
            expected,
        };
        let mut changed = Changed::Other;
        // Each arm sets the field; on a bad value it restores the default and reports it.
        macro_rules! parse {
            ($field:ident, $parse:expr, $expected:expr) => {{
                if reset {
                    self.$field = default.$field;
                } else {
                    match $parse {
                        Some(x) => self.$field = x,
                        None => {
                            self.$field = default.$field;
                            return Err(invalid($expected));
                        }
                    }
                }
            }};
        }
        match name.as_str() {
            "LB_METHOD" => {
                self.method = if reset {
                    default.method
                } else {
                    parse_method(&v)?
                }
            }
            "LB_APPROACH" => {
                // Only graph and hypergraph methods use it in Zoltan; geometric ones ignore it.
                if !reset && !matches!(v.as_str(), "PARTITION" | "REPARTITION" | "REFINE") {
                    return Err(invalid("PARTITION, REPARTITION or REFINE"));
                }
            }
            "NUM_GID_ENTRIES" => parse!(
                num_gid,
                v.parse::<usize>().ok().filter(|&x| x >= 1),
                "an integer >= 1"
            ),
            "NUM_LID_ENTRIES" => parse!(num_lid, v.parse::<usize>().ok(), "an integer >= 0"),
            "OBJ_WEIGHT_DIM" => parse!(obj_weight_dim, v.parse::<usize>().ok(), "an integer >= 0"),
            "RETURN_LISTS" => parse!(
                return_lists,
                parse_return_lists(&v),
                "ALL, IMPORT, EXPORT, PARTS or NONE"
            ),
            "IMBALANCE_TOL" => {
                // Zoltan resets values below 1 to its default.
                parse!(
                    imbalance_tol,
                    v.parse::<f64>().ok().filter(|x| x.is_finite() && *x >= 1.0),
                    "a number >= 1"
                )
            }
            "KEEP_CUTS" => parse!(keep_cuts, flag(&v), "0 or 1"),
            "NUM_GLOBAL_PARTS" | "NUM_GLOBAL_PARTITIONS" => parse!(
                num_global_parts,
                v.parse::<usize>().ok().filter(|&x| x >= 1).map(Some),
                "an integer >= 1"
            ),
            "NUM_LOCAL_PARTS" | "NUM_LOCAL_PARTITIONS" => parse!(
                num_local_parts,
                v.parse::<usize>().ok().map(Some),
                "an integer >= 0"
            ),
            "DEBUG_LEVEL" => parse!(debug_level, v.parse::<i64>().ok(), "an integer"),
            "RCB_RECTILINEAR_BLOCKS" => parse!(rectilinear_blocks, flag(&v), "0 or 1"),
            "MIGRATE_ONLY_PROC_CHANGES" => {
                parse!(migrate_only_proc_changes, flag(&v), "0 or 1")
            }
            "AUTO_MIGRATE" => parse!(auto_migrate, flag(&v), "0 or 1"),
            "USE_DRUM" => {
                changed = Changed::Drum;
                parse!(use_drum, flag(&v), "0 or 1")
            }
            "DRUM_MONITORING" => {
                changed = Changed::Drum;
                parse!(drum_monitoring, flag(&v), "0 or 1")
            }
            "DRUM_MACHINE_FILE" => {
                changed = Changed::Drum;
                // A path: case kept.
                parse!(
                    drum_machine_file,
                    (!raw.is_empty()).then(|| Some(raw.to_string())),
                    "a file name"
                )
            }
            "DRUM_W_COMM" => {
                changed = Changed::Drum;
                parse!(
                    drum_w_comm,
                    v.parse::<f64>().ok().filter(|x| (0.0..=1.0).contains(x)),
                    "a number in [0, 1]"
                )
            }
            "DRUM_MONITORING_PERIOD_MS" => {
                changed = Changed::Drum;
                parse!(
                    drum_period_ms,
                    v.parse::<u64>().ok().filter(|&x| x >= 1),
                    "an integer >= 1 (milliseconds)"
                )
            }
            n if ACCEPTED_WITHOUT_EFFECT.contains(&n) => {}
            _ => {
                return Err(ParamError::Unknown {
                    name,
                    value: raw.to_string(),
                });
            }
        }
        self.given.retain(|(n, _)| *n != name);
        if !reset {
            self.given.push((name, raw.to_string()));
        }
        Ok(changed)
    }
}

fn parse_method(v: &str) -> Result<Method, ParamError> {
    match v {
        "HSFC" => Ok(Method::Hsfc),
        "RCB" => Ok(Method::Rcb),
        "RIB" => Ok(Method::Rib),
        "HIER" => Ok(Method::Hier),
        "NONE" => Ok(Method::None),
        m if OTHER_ZOLTAN_METHODS.contains(&m) => Err(ParamError::Method(format!(
            "LB_METHOD {m} is a Zoltan method this library does not implement (it has HSFC, \
             RCB, RIB, HIER and NONE)"
        ))),
        m => Err(ParamError::Method(format!(
            "invalid LB method specified: {m} (this library has HSFC, RCB, RIB, HIER and NONE)"
        ))),
    }
}

/// Zoltan's reading of `RETURN_LISTS`: both words → all; IMPORT; EXPORT; any string with PART
/// → part assignments; NONE.
fn parse_return_lists(v: &str) -> Option<ReturnLists> {
    let (import, export) = (v.contains("IMPORT"), v.contains("EXPORT"));
    Some(if (import && export) || v == "ALL" {
        ReturnLists::All
    } else if import {
        ReturnLists::Import
    } else if export {
        ReturnLists::Export
    } else if v.contains("PART") {
        ReturnLists::Parts
    } else if v == "NONE" {
        ReturnLists::None
    } else {
        return None;
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_values_are_case_insensitive_and_default_resets() {
        let mut p = Params::default();
        assert_eq!(p.set(" lb_method", "hsfc"), Ok(Changed::Other));
        assert_eq!(p.method, Method::Hsfc);
        p.set("RETURN_LISTS", "part assignment").unwrap();
        assert_eq!(p.return_lists, ReturnLists::Parts);
        p.set("RETURN_LISTS", "export and import").unwrap();
        assert_eq!(p.return_lists, ReturnLists::All);
        p.set("LB_METHOD", "DEFAULT").unwrap();
        assert_eq!(p.method, Method::Rcb);
        assert_eq!(p.set("drum_machine_file", " Dir/M.xml"), Ok(Changed::Drum));
        assert_eq!(p.drum_machine_file.as_deref(), Some("Dir/M.xml"));
    }

    #[test]
    fn bad_values_warn_and_restore_the_default() {
        let mut p = Params::default();
        p.set("IMBALANCE_TOL", "1.5").unwrap();
        let e = p.set("IMBALANCE_TOL", "0.9").unwrap_err();
        assert!(e.to_string().contains("invalid value `0.9'"), "{e}");
        assert_eq!(p.imbalance_tol, 1.1);
        assert!(matches!(
            p.set("NUM_GID_ENTRIES", "0"),
            Err(ParamError::Invalid { .. })
        ));
        assert!(matches!(
            p.set("NO_SUCH_PARAM", "1"),
            Err(ParamError::Unknown { .. })
        ));
        assert!(p.set("RCB_OUTPUT_LEVEL", "0").is_ok());
    }

    #[test]
    fn methods_zoltan_has_and_we_do_not_are_fatal() {
        let mut p = Params::default();
        let e = p.set("LB_METHOD", "GRAPH").unwrap_err();
        assert!(matches!(e, ParamError::Method(_)), "{e}");
        assert!(e.to_string().contains("does not implement"));
        let e = p.set("LB_METHOD", "SPIRAL").unwrap_err();
        assert!(
            e.to_string()
                .starts_with("invalid LB method specified: SPIRAL")
        );
        assert_eq!(p.method, Method::Rcb, "the method is unchanged");
    }
}
