//! The plan of a hierarchical partition: the machine tree with, at every node that splits its
//! objects, the method of its `<lbmethod>` (parsed once, here) and the target fractions of its
//! children from the node powers.

use crate::Error;
use drum_model::{LbMethod, Location, Machine, Node, NodeId, PartitionMethod, Powers};
use std::fmt;

/// Zoltan's default `IMBALANCE_TOL` (`lb_const.h`).
pub const DEFAULT_IMBALANCE_TOL: f64 = 1.1;

/// The default `EFF_MIN` of a DIFFUSION level: each round's transfers aim at Watts'
/// efficiency `U_avg / U_max` of at least this.
pub const DEFAULT_EFF_MIN: f64 = 0.99;

/// The method of one level with its parameters, parsed from a node's `<lbmethod>`.
#[derive(Debug, Clone, PartialEq)]
pub struct LevelMethod {
    /// The partitioner.
    pub kind: PartitionMethod,
    /// `KEEP_CUTS="1"`: keep this level's cuts in the result, and let a repartition start from
    /// them (for HSFC a previous cut stays wherever the parts beside it stay within
    /// `IMBALANCE_TOL`, see [`hsfc::Hsfc::tolerance`]).
    pub keep_cuts: bool,
    /// `IMBALANCE_TOL`: the largest acceptable `W_c / T_c` of a child (Zoltan: max load over
    /// average load). A level that ends above it is reported in
    /// [`crate::HierPartition::warnings`], as Zoltan returns `ZOLTAN_WARN`. Must be ≥ 1.
    pub imbalance_tol: f64,
    /// `RCB_RECTILINEAR_BLOCKS="1"` (RCB and RIB): objects on a cut all go to one side.
    pub keep_ties: bool,
    /// `METHOD` of a DIFFUSION level: the load transfer calculation (`HBM`, `GDE` or
    /// `IMPLICIT`; default HBM).
    pub transfer: diffusion::Method,
    /// `EFF_MIN` of a DIFFUSION level, in (0, 1): the efficiency each round's transfers aim
    /// at (the implicit method's accuracy is `1 − EFF_MIN`).
    pub eff_min: f64,
    /// Parameters given that this level does not use, with where and why (printed as
    /// warnings by the CLI, as Zoltan warns on parameters it does not know).
    pub ignored: Vec<(String, Location, &'static str)>,
}

impl LevelMethod {
    /// HSFC with default parameters: the method of a node without `<lbmethod>`.
    pub fn default_hsfc() -> LevelMethod {
        LevelMethod {
            kind: PartitionMethod::Hsfc,
            keep_cuts: false,
            imbalance_tol: DEFAULT_IMBALANCE_TOL,
            keep_ties: false,
            transfer: diffusion::Method::Hbm,
            eff_min: DEFAULT_EFF_MIN,
            ignored: Vec::new(),
        }
    }

    /// Parses the parameters of `<lbmethod>` of `node` (drum-model has already rejected an
    /// unknown method). A bad value of a known parameter is an error naming the node and the
    /// file position.
    pub fn from_lbmethod(lb: &LbMethod, node: &Node) -> Result<LevelMethod, Error> {
        let kind = lb.method;
        let mut m = LevelMethod {
            kind,
            ..LevelMethod::default_hsfc()
        };
        for a in &lb.params {
            let bad = |expected: &'static str| Error::BadParameter {
                location: a.location.clone(),
                node: node.label(),
                name: a.name.clone(),
                value: a.value.clone(),
                expected,
            };
            let flag = || match a.value.trim() {
                "0" => Ok(false),
                "1" => Ok(true),
                _ => Err(bad("0 or 1")),
            };
            match (a.name.to_ascii_uppercase().as_str(), kind) {
                ("KEEP_CUTS", _) => m.keep_cuts = flag()?,
                ("IMBALANCE_TOL", _) => {
                    let v: f64 = a.value.trim().parse().map_err(|_| bad("a number >= 1"))?;
                    if !(v.is_finite() && v >= 1.0) {
                        return Err(bad("a number >= 1"));
                    }
                    m.imbalance_tol = v;
                }
                ("RCB_RECTILINEAR_BLOCKS", PartitionMethod::Rcb | PartitionMethod::Rib) => {
                    m.keep_ties = flag()?
                }
                ("RCB_REUSE", PartitionMethod::Rcb) => {
                    flag()?;
                    m.ignored.push((
                        a.name.clone(),
                        a.location.clone(),
                        "cuts are exact and deterministic, so starting from the old ones \
                         would give the same cuts",
                    ));
                }
                ("METHOD", PartitionMethod::Diffusion) => {
                    m.transfer = a.value.parse().map_err(|_| bad("HBM, GDE or IMPLICIT"))?
                }
                ("EFF_MIN", PartitionMethod::Diffusion) => {
                    let v: f64 = (a.value.trim().parse()).map_err(|_| bad("a number in (0, 1)"))?;
                    if !(v > 0.0 && v < 1.0) {
                        return Err(bad("a number in (0, 1)"));
                    }
                    m.eff_min = v;
                }
                ("AVERAGE_CUTS", PartitionMethod::Rcb | PartitionMethod::Rib) => {
                    if !flag()? {
                        m.ignored.push((
                            a.name.clone(),
                            a.location.clone(),
                            "cuts always lie midway between the nearest objects on each side",
                        ));
                    }
                }
                _ => m.ignored.push((
                    a.name.clone(),
                    a.location.clone(),
                    "not a parameter of this method here",
                )),
            }
        }
        Ok(m)
    }
}

impl fmt::Display for LevelMethod {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.kind)?;
        if self.keep_cuts {
            f.write_str(" KEEP_CUTS")?;
        }
        if self.keep_ties {
            f.write_str(" RECTILINEAR")?;
        }
        if self.kind == PartitionMethod::Diffusion {
            write!(f, " {} eff_min {}", self.transfer.name(), self.eff_min)?;
        }
        write!(f, " tol {}", self.imbalance_tol)
    }
}

/// What a node splits its objects into.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Child {
    /// A node of the machine tree (children of a network node).
    Node(NodeId),
    /// A rank (processes of a computing node).
    Rank(usize),
}

/// One node of the plan.
#[derive(Debug, Clone, PartialEq)]
pub struct PlanNode {
    /// The machine node.
    pub id: NodeId,
    /// `node 3 ("router-c")`, for messages.
    pub label: String,
    /// Its `nodenum`.
    pub nodenum: u32,
    /// Depth in the tree (root 0).
    pub depth: usize,
    /// Where its `<node>` tag is (for messages).
    pub location: Location,
    /// The method that splits its objects (`None` for a computing node with one rank).
    pub method: Option<LevelMethod>,
    /// What it splits into, in order (empty for a computing node with one rank).
    pub children: Vec<Child>,
    /// Target fractions of the children, from the powers (sum to 1).
    pub targets: Vec<f64>,
    /// The ranks of its subtree, ascending.
    pub ranks: Vec<usize>,
}

/// The machine tree prepared for partitioning: a method and targets at every node that splits.
///
/// Built once per machine and set of powers; the partitioners only read it.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    nodes: Vec<PlanNode>,
    root: NodeId,
    sizes: Vec<f64>,
    /// For each rank, the nodes from the root down to its computing node.
    paths: Vec<Vec<NodeId>>,
}

impl Plan {
    /// Prepares `machine` with `powers` (from `drum_model::static_powers`,
    /// `compute_powers` or a replay). Every `<lbmethod>`'s parameters are parsed here, so a bad
    /// one is reported before any object is touched.
    pub fn new(machine: &Machine, powers: &Powers) -> Result<Plan, Error> {
        let ranks = machine.num_ranks();
        if powers.parts.len() != ranks || powers.nodes.len() != machine.nodes().len() {
            return Err(Error::LengthMismatch {
                what: "powers",
                got: powers.parts.len(),
                expected: ranks,
                per: "rank of the machine (powers computed for another machine?)",
            });
        }
        let depth: Vec<usize> = {
            let mut d = vec![0; machine.nodes().len()];
            for (id, dd) in machine.depth_first() {
                d[id.0] = dd;
            }
            d
        };
        let mut subtree: Vec<Vec<usize>> = vec![Vec::new(); machine.nodes().len()];
        let mut paths = Vec::with_capacity(ranks);
        for r in 0..ranks {
            let path = machine.path_from_root(machine.rank_node(r));
            for id in &path {
                subtree[id.0].push(r);
            }
            paths.push(path);
        }
        let mut nodes = Vec::with_capacity(machine.nodes().len());
        for node in machine.nodes() {
            let (children, method) = if node.kind.is_computing() {
                if node.processes() == 1 {
                    (Vec::new(), None)
                } else {
                    let ch = node.rank_range().map(Child::Rank).collect();
                    (ch, Some(level_method(node)?))
                }
            } else {
                let ch = node.children().iter().map(|&c| Child::Node(c)).collect();
                (ch, Some(level_method(node)?))
            };
            let targets = if children.is_empty() {
                Vec::new()
            } else {
                powers.targets(machine, node.id)
            };
            for (i, &t) in targets.iter().enumerate() {
                if !(t.is_finite() && t >= 0.0) {
                    return Err(Error::BadValue {
                        what: format!("power of child {i} of {}", node.label()),
                        value: t,
                        expected: "a finite share >= 0",
                    });
                }
            }
            nodes.push(PlanNode {
                id: node.id,
                label: node.label(),
                nodenum: node.nodenum,
                depth: depth[node.id.0],
                location: node.location.clone(),
                method,
                children,
                targets,
                ranks: std::mem::take(&mut subtree[node.id.0]),
            });
        }
        Ok(Plan {
            nodes,
            root: machine.root(),
            sizes: powers.parts.clone(),
            paths,
        })
    }

    /// This plan with other part sizes: `sizes` has one relative size per rank (normalised
    /// here), and every splitting node's children get the sums of their subtrees' sizes as
    /// targets (a subtree of size 0 splits evenly: nothing reaches it). The methods stay.
    pub fn with_part_sizes(&self, sizes: &[f64]) -> Result<Plan, Error> {
        if sizes.len() != self.num_ranks() {
            return Err(Error::LengthMismatch {
                what: "targets",
                got: sizes.len(),
                expected: self.num_ranks(),
                per: "rank of the machine",
            });
        }
        let fractions = crate::input::fractions(sizes)?;
        let mut plan = self.clone();
        for id in 0..plan.nodes.len() {
            let k = plan.nodes[id].children.len();
            let shares: Vec<f64> = (0..k)
                .map(|i| {
                    self.child_ranks(NodeId(id), i)
                        .iter()
                        .map(|&r| fractions[r])
                        .sum()
                })
                .collect();
            let total: f64 = shares.iter().sum();
            plan.nodes[id].targets = if total > 0.0 {
                shares.iter().map(|s| s / total).collect()
            } else {
                vec![1.0 / k as f64; k]
            };
        }
        plan.sizes = fractions;
        Ok(plan)
    }

    /// The root node.
    pub fn root(&self) -> NodeId {
        self.root
    }

    /// Node `id`.
    pub fn node(&self, id: NodeId) -> &PlanNode {
        &self.nodes[id.0]
    }

    /// All nodes, indexed by [`NodeId`].
    pub fn nodes(&self) -> &[PlanNode] {
        &self.nodes
    }

    /// Number of ranks (parts).
    pub fn num_ranks(&self) -> usize {
        self.sizes.len()
    }

    /// The part size of every rank (fractions of the whole, from the powers).
    pub fn part_sizes(&self) -> &[f64] {
        &self.sizes
    }

    /// The nodes from the root down to the computing node of `rank`.
    pub fn path(&self, rank: usize) -> &[NodeId] {
        &self.paths[rank]
    }

    /// The nodes that split objects, in depth-first preorder (siblings in document order).
    pub fn split_nodes(&self) -> Vec<NodeId> {
        let mut out = Vec::new();
        let mut stack = vec![self.root];
        while let Some(id) = stack.pop() {
            let n = &self.nodes[id.0];
            if n.method.is_some() {
                out.push(id);
            }
            for c in n.children.iter().rev() {
                if let Child::Node(c) = c {
                    stack.push(*c);
                }
            }
        }
        out
    }

    /// For each rank, the index (in [`Plan::nodes_at_depth`] order) of its ancestor at depth
    /// `depth`, or of its computing node when its path is shorter: the grouping of the parts
    /// that gives the quality of one level of the tree ([`crate::Quality::grouped`]).
    pub fn rank_groups(&self, depth: usize) -> Vec<u32> {
        let nodes = self.nodes_at_depth(depth);
        (0..self.num_ranks())
            .map(|r| {
                let p = &self.paths[r];
                let id = p[depth.min(p.len() - 1)];
                nodes.iter().position(|&n| n == id).expect("listed") as u32
            })
            .collect()
    }

    /// The nodes at `depth` (and the computing nodes above it whose paths end sooner), in
    /// rank order of their first rank.
    pub fn nodes_at_depth(&self, depth: usize) -> Vec<NodeId> {
        let mut out: Vec<NodeId> = Vec::new();
        for p in &self.paths {
            let id = p[depth.min(p.len() - 1)];
            if !out.contains(&id) {
                out.push(id);
            }
        }
        out
    }

    /// The depth of the deepest node.
    pub fn depth(&self) -> usize {
        self.paths.iter().map(|p| p.len() - 1).max().unwrap_or(0)
    }

    /// Index of the child of `node` whose subtree holds `rank` (`None` if none does).
    pub fn child_of_rank(&self, node: NodeId, rank: usize) -> Option<usize> {
        let n = &self.nodes[node.0];
        n.children.iter().position(|c| match *c {
            Child::Rank(r) => r == rank,
            Child::Node(id) => self.nodes[id.0].ranks.binary_search(&rank).is_ok(),
        })
    }

    /// The ranks of child `i` of `node`, ascending.
    pub fn child_ranks(&self, node: NodeId, i: usize) -> &[usize] {
        match &self.nodes[node.0].children[i] {
            Child::Rank(r) => std::slice::from_ref(r),
            Child::Node(id) => &self.nodes[id.0].ranks,
        }
    }

    /// Warnings for parameters the levels ignore: `FILE:LINE:COL: node N ("x"): PARAM ignored: why`.
    pub fn warnings(&self) -> Vec<String> {
        let mut out = Vec::new();
        for n in &self.nodes {
            if let Some(m) = &n.method {
                for (name, at, why) in &m.ignored {
                    out.push(format!(
                        "{at}: {}: {} parameter {name} ignored: {why}",
                        n.label, m.kind
                    ));
                }
            }
        }
        out
    }
}

fn level_method(node: &Node) -> Result<LevelMethod, Error> {
    match &node.lbmethod {
        Some(lb) => LevelMethod::from_lbmethod(lb, node),
        None => Ok(LevelMethod::default_hsfc()),
    }
}
