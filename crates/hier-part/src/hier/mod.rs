//! Hierarchical partitioning along the machine tree (DRUM 2005 §3 and §5; Teresco et al.'s
//! hierarchical balancing, Zoltan's HIER).
//!
//! From the root down, every node that splits (a network node, or a computing node hosting
//! several ranks) divides the objects of its subtree among its children in proportion to their
//! powers, with the method of its `<lbmethod>`; the leaves are ranks, numbered as in DESIGN.md
//! §2, and an object's part is the rank it ends on. See [`Hier`].

mod dist;
mod level;
mod plan;
mod serial;

/// The hierarchical partitioner's buffers, owned by the caller and reused from call to call
/// (fresh pages cost a fault each, as much as a pass over them): the serial walk's two
/// permuted copies of the objects, and the levels' workspaces (`hsfc`'s for the HSFC levels,
/// the bisection's objects for RCB and RIB; one per subtree that runs at a time). Drop it to
/// free the memory.
#[derive(Debug, Default)]
pub struct Workspace {
    walk: serial::Bufs,
    hsfc: Vec<level::LevelWorkspace>,
}

pub use plan::{Child, DEFAULT_EFF_MIN, DEFAULT_IMBALANCE_TOL, LevelMethod, Plan, PlanNode};

use crate::bisect::imbalance;
use crate::{Bisection, Error, Par};
use comm::Comm;
use drum_model::NodeId;
use part_api::Points;
use part_api::Reduce;
use std::collections::BTreeMap;

/// The hierarchical partitioner's settings.
///
/// ```
/// use drum_model::{Machine, PowerConfig, static_powers};
/// use hier_part::{Hier, Plan, Points, Serial};
/// let xml = r#"<machinemodel>
///   <node type="NETWORK" nodenum="0" name="switch" parent="-1"><lbmethod lbm="RCB"/></node>
///   <node type="MULTIPLE_COMPUTING" nodenum="1" name="smp" parent="0" numprocs="2" mflops="100">
///     <lbmethod lbm="HSFC"/>
///   </node>
///   <node type="SINGLE_COMPUTING" nodenum="2" name="slow" parent="0" mflops="100"/>
/// </machinemodel>"#;
/// let machine = Machine::parse_str(xml, "example.xml")?;
/// let powers = static_powers(&machine, &PowerConfig::default())?;
/// let plan = Plan::new(&machine, &powers)?;
/// // 300 points on a diagonal line: the SMP (2 CPUs) gets 2/3, split between its two ranks.
/// let coords: Vec<f64> = (0..300).flat_map(|i| [i as f64, i as f64]).collect();
/// let mut parts = vec![0u32; 300];
/// let result = Hier::default().partition(&Serial, &plan, Points::new(&coords, 2, None), &mut parts)?;
/// assert_eq!(result.rank_counts, vec![100, 100, 100]);
/// assert_eq!(parts[0], 0);
/// assert_eq!(parts[299], 2);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Hier {
    /// Parallelism inside each level's partitioner (HSFC passes, RCB/RIB recursion).
    pub par: Par,
}

impl Hier {
    /// Partitions the points over the ranks of `plan`, writing each point's rank into `parts`
    /// (points have 1, 2 or 3 coordinates; HSFC levels need 2 or 3; weights non-negative).
    ///
    /// Level by level from the root, each node that splits divides its objects among its
    /// children in proportion to the children's powers with its own method; every object gets
    /// exactly one rank. Deterministic: the same for every [`Par`] and every `group`.
    ///
    /// `group`: [`part_api::Serial`] when this process holds all the points (the serial
    /// walk: a stable counting sort per level); or a communicator with one rank per rank of
    /// the machine (world rank r is machine rank r), each passing its own points (possibly
    /// none): each subtree's ranks then partition its objects together on a split
    /// communicator, and the result equals the serial partition of the concatenation of the
    /// ranks' points in rank order. Bad data on any rank is an error on every rank.
    pub fn partition<C: Comm + Reduce>(
        &self,
        group: &C,
        plan: &Plan,
        points: Points<'_>,
        parts: &mut [u32],
    ) -> Result<HierPartition, Error> {
        self.partition_with(&mut Workspace::default(), group, plan, points, parts)
    }

    /// [`Hier::partition`] with the caller's buffers `ws`, kept for the next call.
    pub fn partition_with<C: Comm + Reduce>(
        &self,
        ws: &mut Workspace,
        group: &C,
        plan: &Plan,
        points: Points<'_>,
        parts: &mut [u32],
    ) -> Result<HierPartition, Error> {
        self.run(ws, group, plan, None, points, parts)
    }

    /// Repartitions after the load changed (KEEP_CUTS): `parts` holds each point's current
    /// rank on entry and its new rank on return; `previous` is this rank's result of the last
    /// partition. HSFC levels with `KEEP_CUTS="1"` start from `previous`'s cuts and keep each
    /// cut wherever the parts beside it stay within the level's `IMBALANCE_TOL`, so little
    /// moves; other levels partition afresh (their cuts are exact and deterministic, so an
    /// unchanged load gives unchanged cuts). [`HierPartition::moved`] reports what changed
    /// rank. `group` as for [`Hier::partition`]; `ws`: the caller's buffers (a repartition is
    /// the call that repeats).
    pub fn repartition<C: Comm + Reduce>(
        &self,
        ws: &mut Workspace,
        group: &C,
        plan: &Plan,
        previous: &HierPartition,
        points: Points<'_>,
        parts: &mut [u32],
    ) -> Result<HierPartition, Error> {
        self.run(ws, group, plan, Some(previous), points, parts)
    }

    /// This partitioner on `plan`'s machine tree as a [`part_api::Partitioner`], whose
    /// targets are the ranks' part sizes.
    pub fn on(self, plan: &Plan) -> OnPlan<'_> {
        OnPlan { hier: self, plan }
    }

    fn run<C: Comm + Reduce>(
        &self,
        ws: &mut Workspace,
        group: &C,
        plan: &Plan,
        previous: Option<&HierPartition>,
        points: Points<'_>,
        parts: &mut [u32],
    ) -> Result<HierPartition, Error> {
        if Comm::size(group) == 1 {
            serial::partition(self.par, ws, plan, points, parts, previous)
        } else {
            if ws.hsfc.is_empty() {
                ws.hsfc.push(level::LevelWorkspace::default());
            }
            self.run_dist(&mut ws.hsfc[0].hsfc, group, plan, previous, points, parts)
        }
    }
}

/// The cuts one level made, kept when its method has `KEEP_CUTS="1"`.
#[derive(Debug, Clone, PartialEq)]
#[expect(
    clippy::large_enum_variant,
    reason = "one per kept level; boxing the HSFC partition would allocate per repartition"
)]
pub enum LevelCuts {
    /// An HSFC level: the curve and its cuts (a repartition starts from them).
    Hsfc(hsfc::Partition),
    /// An RCB or RIB level: the cut tree.
    Bisection(Bisection),
    /// A DIFFUSION level's repartition: no cuts (objects moved one by one), its figures.
    Diffusion(Diffused),
}

/// What a DIFFUSION level's repartition did ([`diffusion::Rebalance`] in short).
#[derive(Debug, Clone, PartialEq)]
pub struct Diffused {
    /// Objects of each child.
    pub part_counts: Vec<usize>,
    /// Rounds of transfer calculation and task selection.
    pub rounds: usize,
    /// `max_c W_c / T_c` of the children at the end.
    pub imbalance: f64,
    /// Whether the level's `IMBALANCE_TOL` was met.
    pub met: bool,
}

impl LevelCuts {
    /// The child (index among the node's children) a point at `x` falls in.
    pub fn point_assign(&self, x: &[f64]) -> Result<usize, Error> {
        match self {
            LevelCuts::Hsfc(p) => Ok(p.point_assign(x)? as usize),
            LevelCuts::Bisection(b) => {
                if x.len() != b.dim {
                    return Err(Error::LengthMismatch {
                        what: "point",
                        got: x.len(),
                        expected: b.dim,
                        per: "coordinate",
                    });
                }
                Ok(b.point_assign(x) as usize)
            }
            LevelCuts::Diffusion(_) => Err(Error::NoCutsInDiffusion),
        }
    }
}

/// Objects that changed rank in a repartition.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Moved {
    /// Their number.
    pub count: u64,
    /// Their total weight (unit weights: their number).
    pub weight: f64,
}

/// A level whose children ended outside its `IMBALANCE_TOL` (Zoltan would return
/// `ZOLTAN_WARN`).
#[derive(Debug, Clone, PartialEq)]
pub struct ToleranceWarning {
    /// The node that split.
    pub node: NodeId,
    /// Its label.
    pub label: String,
    /// The largest `W_c / T_c` among its children.
    pub ratio: f64,
    /// Its `IMBALANCE_TOL`.
    pub tolerance: f64,
}

impl std::fmt::Display for ToleranceWarning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: a child got {:.4} times its target, above IMBALANCE_TOL = {}",
            self.label, self.ratio, self.tolerance
        )
    }
}

/// What one level did (from the final per-rank weights, so serial and distributed runs agree).
#[derive(Debug, Clone, PartialEq)]
pub struct LevelReport {
    /// The node that split.
    pub node: NodeId,
    /// Its label.
    pub label: String,
    /// Its depth (root 0).
    pub depth: usize,
    /// Its method.
    pub method: LevelMethod,
    /// Weight each child got.
    pub weights: Vec<f64>,
    /// Each child's target: its share of the node's weight.
    pub targets: Vec<f64>,
    /// The largest `W_c / T_c` over children with a target (1 when the node got nothing).
    pub max_ratio: f64,
}

fn levels(plan: &Plan, rank_weights: &[f64]) -> Vec<LevelReport> {
    plan.split_nodes()
        .into_iter()
        .map(|id| {
            let n = plan.node(id);
            let w_node: f64 = n.ranks.iter().map(|&r| rank_weights[r]).sum();
            let weights: Vec<f64> = (0..n.children.len())
                .map(|i| {
                    plan.child_ranks(id, i)
                        .iter()
                        .map(|&r| rank_weights[r])
                        .sum()
                })
                .collect();
            let targets: Vec<f64> = n.targets.iter().map(|t| t * w_node).collect();
            let max_ratio = if w_node > 0.0 {
                imbalance(&weights, &targets).0
            } else {
                1.0
            };
            LevelReport {
                node: id,
                label: n.label.clone(),
                depth: n.depth,
                method: n.method.clone().expect("split nodes have a method"),
                weights,
                targets,
                max_ratio,
            }
        })
        .collect()
}

/// The result of a hierarchical partition: per-rank figures, the kept cuts, warnings.
///
/// The figures are the same on every rank of a distributed run and equal to the serial run's.
#[derive(Debug, Clone)]
pub struct HierPartition {
    /// Dimension of the points.
    pub dim: usize,
    /// `W_r`: weight of the objects of each rank (unit weights: their number), summed in
    /// object order.
    pub rank_weights: Vec<f64>,
    /// Number of objects of each rank.
    pub rank_counts: Vec<u64>,
    /// `T_r = s_r · W`, with `s_r` the rank's part size.
    pub targets: Vec<f64>,
    /// `W`: total weight.
    pub total_weight: f64,
    /// max_r |W_r − T_r| / T_r over ranks with T_r > 0.
    pub max_rel_dev: f64,
    /// max_r W_r / T_r over ranks with T_r > 0.
    pub max_ratio: f64,
    /// max_r |W_r − T_r|.
    pub max_abs_dev: f64,
    /// Cuts of the levels with `KEEP_CUTS="1"` (serial: every such level; distributed: those
    /// this rank took part in).
    pub cuts: BTreeMap<NodeId, LevelCuts>,
    /// Levels that ended above their `IMBALANCE_TOL`.
    pub warnings: Vec<ToleranceWarning>,
    /// After a repartition: what changed rank.
    pub moved: Option<Moved>,
    /// Wall time of each level's partitioner call on this process, in preorder (diagnostics:
    /// not part of the result's identity).
    pub level_times: Vec<(NodeId, f64)>,
}

impl HierPartition {
    /// The rank a point at `x` would go to, walking the kept cuts from the root
    /// (Zoltan's `Point_PP_Assign` through the hierarchy). Needs `KEEP_CUTS="1"` on every
    /// level the walk passes, and in a distributed run only answers for points whose path the
    /// rank took part in; otherwise an error names the level.
    pub fn point_assign(&self, plan: &Plan, x: &[f64]) -> Result<u32, Error> {
        let mut id = plan.root();
        loop {
            let n = plan.node(id);
            let c = match n.children.len() {
                0 => return Ok(n.ranks[0] as u32),
                1 => 0,
                _ => match self.cuts.get(&id) {
                    Some(cuts) => cuts.point_assign(x)?,
                    None => {
                        return Err(Error::NoCuts {
                            node: n.label.clone(),
                        });
                    }
                },
            };
            match n.children[c] {
                Child::Rank(r) => return Ok(r as u32),
                Child::Node(next) => id = next,
            }
        }
    }

    /// What each level did: its children's weights against their targets.
    pub fn levels(&self, plan: &Plan) -> Vec<LevelReport> {
        levels(plan, &self.rank_weights)
    }

    /// A readable report: one line per level (indented by depth: method, children, worst
    /// `W/T`), then one line per rank (node, objects, weight, target, `W/T`) and a summary.
    pub fn table(&self, plan: &Plan) -> String {
        let mut s = String::from("levels (node: method, children, max W/T of a child):\n");
        for l in self.levels(plan) {
            let flag = if l.max_ratio > l.method.imbalance_tol {
                "  ABOVE IMBALANCE_TOL"
            } else {
                ""
            };
            s += &format!(
                "{:indent$}{}: {}, {} children, max W/T {:.4}{flag}\n",
                "",
                l.label,
                l.method,
                l.weights.len(),
                l.max_ratio,
                indent = 2 * (l.depth + 1)
            );
        }
        s += "rank  node                         objects        weight        target     W/T\n";
        for r in 0..self.rank_weights.len() {
            let node = plan.path(r).last().map(|&id| plan.node(id).label.clone());
            let t = self.targets[r];
            let ratio = if t > 0.0 {
                format!("{:.4}", self.rank_weights[r] / t)
            } else {
                "-".into()
            };
            s += &format!(
                "{r:>4}  {:<26} {:>9} {:>13.3} {:>13.3} {ratio:>7}\n",
                node.unwrap_or_default(),
                self.rank_counts[r],
                self.rank_weights[r],
                t
            );
        }
        s += &format!(
            "total weight {:.3}, max W/T {:.4}, max |W-T|/T {:.2e}\n",
            self.total_weight, self.max_ratio, self.max_rel_dev
        );
        s
    }

    /// Builds the figures from per-rank weights and counts (both paths call this, so a
    /// distributed result equals the serial one).
    fn from_ranks(
        plan: &Plan,
        dim: usize,
        rank_weights: Vec<f64>,
        rank_counts: Vec<u64>,
        cuts: BTreeMap<NodeId, LevelCuts>,
        level_times: Vec<(NodeId, f64)>,
    ) -> HierPartition {
        let total_weight: f64 = rank_weights.iter().sum();
        let targets: Vec<f64> = plan.part_sizes().iter().map(|s| s * total_weight).collect();
        let (max_ratio, max_rel_dev, max_abs_dev) = imbalance(&rank_weights, &targets);
        let warnings = levels(plan, &rank_weights)
            .into_iter()
            .filter(|l| l.max_ratio > l.method.imbalance_tol)
            .map(|l| ToleranceWarning {
                node: l.node,
                label: l.label,
                ratio: l.max_ratio,
                tolerance: l.method.imbalance_tol,
            })
            .collect();
        HierPartition {
            dim,
            rank_weights,
            rank_counts,
            targets,
            total_weight,
            max_rel_dev,
            max_ratio,
            max_abs_dev,
            cuts,
            warnings,
            moved: None,
            level_times,
        }
    }
}

/// [`Hier`] on one machine tree ([`Hier::on`]): the workspace's partitioner interface, so
/// code written against [`part_api::Partitioner`] runs the hierarchical walk as it runs HSFC,
/// RCB or RIB. `targets` holds one relative part size per rank of the plan; every node then
/// splits in proportion to its children's sums ([`Plan::with_part_sizes`]; the plan's own
/// sizes reuse it as it is).
///
/// ```
/// use drum_model::{Machine, PowerConfig, static_powers};
/// use hier_part::{Hier, Partitioner, Plan, Points, Serial};
/// let xml = r#"<machinemodel>
///   <node type="NETWORK" nodenum="0" name="switch" parent="-1"><lbmethod lbm="RCB"/></node>
///   <node type="SINGLE_COMPUTING" nodenum="1" name="a" parent="0"/>
///   <node type="SINGLE_COMPUTING" nodenum="2" name="b" parent="0"/>
/// </machinemodel>"#;
/// let machine = Machine::parse_str(xml, "two.xml")?;
/// let plan = Plan::new(&machine, &static_powers(&machine, &PowerConfig::default())?)?;
/// let coords: Vec<f64> = (0..400).map(|i| i as f64).collect();
/// let mut parts = vec![0u32; 400];
/// let p = Hier::default()
///     .on(&plan)
///     .partition(&Serial, Points::new(&coords, 1, None), &[1.0, 3.0], &mut parts)?;
/// assert_eq!(p.rank_counts, vec![100, 300]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy)]
pub struct OnPlan<'p> {
    /// The partitioner's settings.
    pub hier: Hier,
    /// The machine tree, with the methods of its levels.
    pub plan: &'p Plan,
}

impl<C: Comm + Reduce> part_api::Partitioner<C> for OnPlan<'_> {
    type Output = HierPartition;
    type Error = Error;
    type Workspace = Workspace;

    fn partition_with(
        &self,
        ws: &mut Workspace,
        group: &C,
        points: Points<'_>,
        targets: &[f64],
        parts: &mut [u32],
    ) -> Result<HierPartition, Error> {
        if targets == self.plan.part_sizes() {
            return self
                .hier
                .partition_with(ws, group, self.plan, points, parts);
        }
        let plan = self.plan.with_part_sizes(targets)?;
        self.hier.partition_with(ws, group, &plan, points, parts)
    }
}
