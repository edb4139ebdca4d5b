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

/// One `Zoltan_Set_Param` call: the name (upper case), the value as given (trimmed) and in
/// upper case, and whether it asks for the default.
struct Setting {
    name: String,
    raw: String,
    v: String,
    reset: bool,
}

impl Setting {
    fn invalid(&self, expected: &'static str) -> ParamError {
        ParamError::Invalid {
            name: self.name.clone(),
            value: self.raw.clone(),
            expected,
        }
    }

    fn unknown(&self) -> ParamError {
        ParamError::Unknown {
            name: self.name.clone(),
            value: self.raw.clone(),
        }
    }
}

/// Sets `$p.$field` from `$parse` (the default on a reset); on a bad value it restores the
/// default and returns the error.
macro_rules! parse {
    ($p:ident . $field:ident, $s:ident, $parse:expr, $expected:expr) => {{
        if $s.reset {
            $p.$field = Params::default().$field;
        } else {
            match $parse {
                Some(x) => $p.$field = x,
                None => {
                    $p.$field = Params::default().$field;
                    return Err($s.invalid($expected));
                }
            }
        }
    }};
}

impl Params {
    /// Sets one parameter (Zoltan's `Zoltan_Set_Param`).
    pub(crate) fn set(&mut self, name: &str, value: &str) -> Result<Changed, ParamError> {
        let raw = value.trim().to_string();
        let s = Setting {
            name: name.trim().to_ascii_uppercase(),
            v: raw.to_ascii_uppercase(),
            reset: raw.eq_ignore_ascii_case("DEFAULT"),
            raw,
        };
        let changed = if s.name == "USE_DRUM" || s.name.starts_with("DRUM_") {
            self.set_drum(&s)?;
            Changed::Drum
        } else {
            self.set_zoltan(&s)?;
            Changed::Other
        };
        self.given.retain(|(n, _)| *n != s.name);
        if !s.reset {
            self.given.push((s.name, s.raw));
        }
        Ok(changed)
    }

    /// Zoltan's own parameters.
    fn set_zoltan(&mut self, s: &Setting) -> Result<(), ParamError> {
        let v = s.v.as_str();
        match s.name.as_str() {
            "LB_METHOD" => {
                self.method = if s.reset {
                    Params::default().method
                } else {
                    parse_method(v)?
                }
            }
            "LB_APPROACH" => {
                // Only graph and hypergraph methods use it in Zoltan; geometric ones ignore it.
                if !s.reset && !matches!(v, "PARTITION" | "REPARTITION" | "REFINE") {
                    return Err(s.invalid("PARTITION, REPARTITION or REFINE"));
                }
            }
            "NUM_GID_ENTRIES" => parse!(
                self.num_gid,
                s,
                v.parse::<usize>().ok().filter(|&x| x >= 1),
                "an integer >= 1"
            ),
            "NUM_LID_ENTRIES" => {
                parse!(self.num_lid, s, v.parse::<usize>().ok(), "an integer >= 0")
            }
            "OBJ_WEIGHT_DIM" => parse!(
                self.obj_weight_dim,
                s,
                v.parse::<usize>().ok(),
                "an integer >= 0"
            ),
            "RETURN_LISTS" => parse!(
                self.return_lists,
                s,
                parse_return_lists(v),
                "ALL, IMPORT, EXPORT, PARTS or NONE"
            ),
            "IMBALANCE_TOL" => {
                // Zoltan resets values below 1 to its default.
                parse!(
                    self.imbalance_tol,
                    s,
                    v.parse::<f64>().ok().filter(|x| x.is_finite() && *x >= 1.0),
                    "a number >= 1"
                )
            }
            "KEEP_CUTS" => parse!(self.keep_cuts, s, flag(v), "0 or 1"),
            "NUM_GLOBAL_PARTS" | "NUM_GLOBAL_PARTITIONS" => parse!(
                self.num_global_parts,
                s,
                v.parse::<usize>().ok().filter(|&x| x >= 1).map(Some),
                "an integer >= 1"
            ),
            "NUM_LOCAL_PARTS" | "NUM_LOCAL_PARTITIONS" => parse!(
                self.num_local_parts,
                s,
                v.parse::<usize>().ok().map(Some),
                "an integer >= 0"
            ),
            "DEBUG_LEVEL" => parse!(self.debug_level, s, v.parse::<i64>().ok(), "an integer"),
            "RCB_RECTILINEAR_BLOCKS" => parse!(self.rectilinear_blocks, s, flag(v), "0 or 1"),
            "MIGRATE_ONLY_PROC_CHANGES" => {
                parse!(self.migrate_only_proc_changes, s, flag(v), "0 or 1")
            }
            "AUTO_MIGRATE" => parse!(self.auto_migrate, s, flag(v), "0 or 1"),
            n if ACCEPTED_WITHOUT_EFFECT.contains(&n) => {}
            _ => return Err(s.unknown()),
        }
        Ok(())
    }

    /// The DRUM set (`USE_DRUM`, `DRUM_*`).
    fn set_drum(&mut self, s: &Setting) -> Result<(), ParamError> {
        let v = s.v.as_str();
        match s.name.as_str() {
            "USE_DRUM" => parse!(self.use_drum, s, flag(v), "0 or 1"),
            "DRUM_MONITORING" => parse!(self.drum_monitoring, s, flag(v), "0 or 1"),
            // A path: case kept.
            "DRUM_MACHINE_FILE" => parse!(
                self.drum_machine_file,
                s,
                (!s.raw.is_empty()).then(|| Some(s.raw.clone())),
                "a file name"
            ),
            "DRUM_W_COMM" => parse!(
                self.drum_w_comm,
                s,
                v.parse::<f64>().ok().filter(|x| (0.0..=1.0).contains(x)),
                "a number in [0, 1]"
            ),
            "DRUM_MONITORING_PERIOD_MS" => parse!(
                self.drum_period_ms,
                s,
                v.parse::<u64>().ok().filter(|&x| x >= 1),
                "an integer >= 1 (milliseconds)"
            ),
            _ => return Err(s.unknown()),
        }
        Ok(())
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
