//! Small machines made on the fly: one switch over nodes of given ranks and ratings, for the
//! two-phase scheme's groups when no machine file is given, and for tests and studies.

use crate::SamrError;
use drum_model::{Machine, PowerConfig, static_powers};
use hier_part::Plan;
use std::fmt::Write as _;

/// One node under the switch of [`switch_plan`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SwitchNode {
    /// Its ranks (one process per processor; at least 1).
    pub ranks: usize,
    /// Each processor's MFLOPS rating (finite, > 0).
    pub mflops: f64,
}

/// A machine of one switch over `nodes` (named `n0`, `n1`, … in order, so ranks are dealt
/// to them consecutively), its network node split with `lbm` (`HSFC`, `RCB`, `RIB`, …, the
/// `lbm=` names of the machine format), and its plan with static powers (each node in
/// proportion to `ranks × mflops`, each rank to its `mflops`).
///
/// ```
/// use samr_kernel::{SwitchNode, switch_plan};
/// let nodes = [SwitchNode { ranks: 2, mflops: 100.0 }, SwitchNode { ranks: 1, mflops: 200.0 }];
/// let plan = switch_plan(&nodes, "HSFC").unwrap();
/// assert_eq!(plan.rank_groups(1), vec![0, 0, 1]);
/// ```
pub fn switch_plan(nodes: &[SwitchNode], lbm: &str) -> Result<Plan, SamrError> {
    let mut xml = format!(
        r#"<machinemodel><node type="NETWORK" nodenum="0" name="switch" parent="-1"><lbmethod lbm="{lbm}"/></node>"#
    );
    for (k, n) in nodes.iter().enumerate() {
        let (kind, procs) = match n.ranks {
            1 => ("SINGLE_COMPUTING", String::new()),
            r => ("MULTIPLE_COMPUTING", format!(r#" numprocs="{r}""#)),
        };
        let _ = write!(
            xml,
            r#"<node type="{kind}"{procs} nodenum="{}" name="n{k}" parent="0" mflops="{}"/>"#,
            k + 1,
            n.mflops
        );
    }
    xml.push_str("</machinemodel>");
    let machine = Machine::parse_str(&xml, "a switch machine")?;
    let powers = static_powers(&machine, &PowerConfig::default())?;
    Ok(Plan::new(&machine, &powers)?)
}
