//! Stage 2 of loading: the validated machine tree ([`Machine`]), its nodes, ranks and
//! `<lbmethod>`s, and the writer back to DrumHead XML.

use crate::error::{Error, Location, Result};
use crate::xml::{Attribute, push_attr};
use std::fmt;
use std::ops::Range;

/// Most ranks a machine description may declare (guards against `ranks="4000000000"`).
pub const MAX_RANKS: usize = 1 << 20;
/// CPU numbers in `cpus` must be below this.
pub const MAX_CPU: u32 = 1 << 16;
/// Largest machine file read (16 MiB; a 10,000-node machine takes about 1 MiB): a larger
/// file, or an endless one (`drum check /dev/zero`), is refused before it fills memory.
pub const MAX_MACHINE_FILE_BYTES: u64 = 16 << 20;

/// Index of a node in [`Machine::nodes`] (document order). Only meaningful for the machine that
/// produced it; using it with another machine panics or gives that machine's node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NodeId(pub usize);

/// What a node is (DrumHead `type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeKind {
    /// `NETWORK`: a router or switch; an internal node.
    Network,
    /// `SINGLE_COMPUTING`: a uniprocessor (SP) node; a leaf.
    SingleComputing,
    /// `MULTIPLE_COMPUTING`: a shared-memory multiprocessor (SMP) node with `numprocs` CPUs; a
    /// leaf.
    MultipleComputing {
        /// Number of processors (`numprocs`).
        numprocs: u32,
    },
}

impl NodeKind {
    /// The DrumHead spelling (`NETWORK`, ...).
    pub fn as_str(&self) -> &'static str {
        match self {
            NodeKind::Network => "NETWORK",
            NodeKind::SingleComputing => "SINGLE_COMPUTING",
            NodeKind::MultipleComputing { .. } => "MULTIPLE_COMPUTING",
        }
    }

    /// True for the two computing kinds.
    pub fn is_computing(&self) -> bool {
        !matches!(self, NodeKind::Network)
    }
}

/// A sorted, duplicate-free list of CPU numbers, written like `0-1,3` (the `cpus` attribute).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CpuList(Vec<u32>);

impl CpuList {
    /// Parses `0-3,6,8-9` (whitespace around items allowed). Errors name what is wrong.
    pub fn parse(text: &str) -> Result<CpuList, String> {
        let mut cpus = Vec::new();
        for item in text.split(',') {
            let item = item.trim();
            if item.is_empty() {
                return Err("an empty item".into());
            }
            let (lo, hi) = match item.split_once('-') {
                Some((a, b)) => (parse_cpu(a)?, parse_cpu(b)?),
                None => {
                    let c = parse_cpu(item)?;
                    (c, c)
                }
            };
            if lo > hi {
                return Err(format!("the range {item} runs backwards"));
            }
            cpus.extend(lo..=hi);
        }
        cpus.sort_unstable();
        let before = cpus.len();
        cpus.dedup();
        if cpus.len() != before {
            return Err("a CPU listed twice".into());
        }
        Ok(CpuList(cpus))
    }

    /// A list from CPU numbers (sorted and deduplicated here).
    pub fn from_cpus(mut cpus: Vec<u32>) -> CpuList {
        cpus.sort_unstable();
        cpus.dedup();
        CpuList(cpus)
    }

    /// The CPUs, ascending.
    pub fn cpus(&self) -> &[u32] {
        &self.0
    }

    /// Number of CPUs.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// True if empty (never for a parsed list).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

fn parse_cpu(s: &str) -> Result<u32, String> {
    let s = s.trim();
    match s.parse::<u32>() {
        Ok(c) if c < MAX_CPU => Ok(c),
        Ok(c) => Err(format!(
            "CPU {c} is beyond the largest supported CPU number {}",
            MAX_CPU - 1
        )),
        Err(_) => Err(format!("{s:?} is not a CPU number")),
    }
}

impl fmt::Display for CpuList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        let mut i = 0;
        while i < self.0.len() {
            let mut j = i;
            while j + 1 < self.0.len() && self.0[j + 1] == self.0[j] + 1 {
                j += 1;
            }
            if !first {
                f.write_str(",")?;
            }
            first = false;
            if j == i {
                write!(f, "{}", self.0[i])?;
            } else {
                write!(f, "{}-{}", self.0[i], self.0[j])?;
            }
            i = j + 1;
        }
        Ok(())
    }
}

/// A partitioning method a node can name in `<lbmethod lbm="...">`. The names are part of the
/// file format, so the reader rejects any other with its `FILE:LINE:COL`; drum-model does not
/// know the partitioners themselves (hier-part maps each name to one).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PartitionMethod {
    /// Hilbert space-filling curve (`HSFC`).
    Hsfc,
    /// Recursive coordinate bisection (`RCB`).
    Rcb,
    /// Recursive inertial bisection (`RIB`).
    Rib,
    /// Incremental load transfer between neighbouring parts (`DIFFUSION`; Watts, Rieffel &
    /// Taylor 1998): a repartition moves objects from the current partition along the
    /// processor graph, boundary first (parameter `METHOD` = `HBM`, `GDE` or `IMPLICIT`).
    Diffusion,
}

impl PartitionMethod {
    /// The names accepted in `lbm="..."` (case-insensitive, as Zoltan's `LB_METHOD`).
    pub const NAMES: [&'static str; 4] = ["HSFC", "RCB", "RIB", "DIFFUSION"];

    /// Parses a method name, ignoring ASCII case and surrounding white space.
    pub fn parse(name: &str) -> Option<PartitionMethod> {
        let n = name.trim();
        [
            PartitionMethod::Hsfc,
            PartitionMethod::Rcb,
            PartitionMethod::Rib,
            PartitionMethod::Diffusion,
        ]
        .into_iter()
        .find(|m| m.as_str().eq_ignore_ascii_case(n))
    }

    /// The canonical name (what the writer puts in `lbm="..."`).
    pub fn as_str(self) -> &'static str {
        match self {
            PartitionMethod::Hsfc => "HSFC",
            PartitionMethod::Rcb => "RCB",
            PartitionMethod::Rib => "RIB",
            PartitionMethod::Diffusion => "DIFFUSION",
        }
    }
}

impl fmt::Display for PartitionMethod {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A node's `<lbmethod lbm=".." PARAM=".."/>`: the partitioning method hier-part uses to split
/// this node's objects among its children (or its processes), with its parameters in file order.
/// drum-model does not interpret the parameters; the partitioner does.
#[derive(Debug, Clone, PartialEq)]
pub struct LbMethod {
    /// The `lbm` attribute (`HSFC`, `RCB`, `RIB`).
    pub method: PartitionMethod,
    /// Where the `lbm` attribute is (for "unknown method X at node N (file:line:col)").
    pub method_location: Location,
    /// The other attributes, e.g. `KEEP_CUTS="1"`, in file order, each with its location.
    pub params: Vec<Attribute>,
    /// Where the `<lbmethod>` element starts.
    pub location: Location,
}

impl LbMethod {
    /// The value of parameter `name` (exact, case-sensitive match), if given.
    pub fn param(&self, name: &str) -> Option<&str> {
        self.params
            .iter()
            .find(|a| a.name == name)
            .map(|a| a.value.as_str())
    }
}

/// One node of the machine tree.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Node {
    /// Its index in [`Machine::nodes`].
    pub id: NodeId,
    /// `nodenum`: the number the file gives it (unique, not necessarily dense).
    pub nodenum: u32,
    /// `type` (with `numprocs` for SMP nodes).
    pub kind: NodeKind,
    /// `name` (empty if absent).
    pub name: String,
    /// `IP`, if given.
    pub ip: Option<String>,
    /// `isMonitorable`, if given.
    pub is_monitorable: Option<bool>,
    /// `imgx`, `imgy`: DrumHead canvas position, if given.
    pub img: (Option<f64>, Option<f64>),
    /// `mflops`: the benchmark rating b_n of one processor of this node.
    pub mflops: Option<f64>,
    /// `bandwidth`: the capacity C_i of this node's link, Mbit/s.
    pub bandwidth: Option<f64>,
    /// `memory`: the node's physical memory in MB (used by the Sinha–Parashar model).
    pub memory: Option<f64>,
    /// `cpus`: the cores of this host the node is bound to (emulated heterogeneity).
    pub cpus: Option<CpuList>,
    /// `ranks`: processes hosted, if given (see [`Node::processes`]).
    pub ranks: Option<u32>,
    /// `load`: compute-bound competing processes that an emulation on one host runs on the
    /// node's `cpus` (a drum-rs extension, the synthetic load of Sinha–Parashar §6.1.1:
    /// `fem-laplace --machine-load` and `cargo xtask run-laplace` start them). Not a
    /// capability: powers ignore it; the monitors measure its effect.
    pub load: Option<u32>,
    /// The node's `<lbmethod>`, if any.
    pub lbmethod: Option<LbMethod>,
    /// Attributes this crate does not know, kept in file order and written back.
    pub extra: Vec<Attribute>,
    /// Where the `<node` tag starts.
    pub location: Location,
    pub(crate) parent: Option<NodeId>,
    pub(crate) children: Vec<NodeId>,
    pub(crate) first_rank: usize,
}

impl Node {
    /// k_n: the number of application processes on this node: `ranks`, else `numprocs`, else 1
    /// (0 for a network node).
    pub fn processes(&self) -> usize {
        match self.kind {
            NodeKind::Network => 0,
            NodeKind::SingleComputing => self.ranks.unwrap_or(1) as usize,
            NodeKind::MultipleComputing { numprocs } => self.ranks.unwrap_or(numprocs) as usize,
        }
    }

    /// m: the number of CPUs of a computing node (1 for SP, `numprocs` for SMP, 0 for network).
    pub fn processors(&self) -> usize {
        match self.kind {
            NodeKind::Network => 0,
            NodeKind::SingleComputing => 1,
            NodeKind::MultipleComputing { numprocs } => numprocs as usize,
        }
    }

    /// The parent, `None` for the root.
    pub fn parent(&self) -> Option<NodeId> {
        self.parent
    }

    /// The children in document order (empty for computing nodes).
    pub fn children(&self) -> &[NodeId] {
        &self.children
    }

    /// The ranks this computing node hosts (consecutive; empty for network nodes).
    pub fn rank_range(&self) -> Range<usize> {
        self.first_rank..self.first_rank + self.processes()
    }

    /// `node 3 ("rivera")`, for messages.
    pub fn label(&self) -> String {
        format!("node {} ({:?})", self.nodenum, self.name)
    }
}

/// A validated machine description: one root, a tree (no cycles), unique `nodenum`s, computing
/// nodes as leaves, every network node with children, numbers finite and in range.
///
/// Ranks: computing nodes in document order, k_n = [`Node::processes`] consecutive ranks each
/// (DESIGN.md §2).
#[derive(Debug, Clone, PartialEq)]
pub struct Machine {
    pub(crate) source: String,
    pub(crate) location: Location,
    pub(crate) attrs: Vec<Attribute>,
    pub(crate) nodes: Vec<Node>,
    pub(crate) root: NodeId,
    pub(crate) rank_node: Vec<NodeId>,
}

impl Machine {
    /// The name given when loading (file path), used in messages.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// Where the `<machinemodel>` element starts.
    pub fn location(&self) -> &Location {
        &self.location
    }

    /// Attributes of `<machinemodel>` itself (kept and written back).
    pub fn attributes(&self) -> &[Attribute] {
        &self.attrs
    }

    /// The root node.
    pub fn root(&self) -> NodeId {
        self.root
    }

    /// All nodes in document order; `nodes()[id.0].id == id`.
    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    /// One node. Panics if `id` is not from this machine.
    pub fn node(&self, id: NodeId) -> &Node {
        &self.nodes[id.0]
    }

    /// The node with this `nodenum`.
    pub fn find(&self, nodenum: u32) -> Option<NodeId> {
        self.nodes
            .iter()
            .find(|n| n.nodenum == nodenum)
            .map(|n| n.id)
    }

    /// Gives every node that splits its objects (a network node, a computing node hosting
    /// more than one process) the method `method` with the parameters `params` (name, value):
    /// a command-line override such as `fem-laplace --transfer`. A node's own parameters of
    /// other names stay (e.g. its `IMBALANCE_TOL`); `origin` names where the new ones come
    /// from in messages (their location is `origin:0:0`).
    pub fn set_every_lbmethod(
        &mut self,
        method: PartitionMethod,
        params: &[(&str, &str)],
        origin: &str,
    ) {
        let at = Location::new(origin, 0, 0);
        for n in &mut self.nodes {
            if n.children.is_empty() && n.processes() <= 1 {
                continue;
            }
            let lb = n.lbmethod.get_or_insert_with(|| LbMethod {
                method,
                method_location: at.clone(),
                params: Vec::new(),
                location: at.clone(),
            });
            lb.method = method;
            lb.method_location = at.clone();
            lb.params.retain(|a| !params.iter().any(|p| p.0 == a.name));
            lb.params
                .extend(params.iter().map(|&(name, value)| Attribute {
                    name: name.into(),
                    value: value.into(),
                    location: at.clone(),
                }));
        }
    }

    /// Children of `id` in document order.
    pub fn children(&self, id: NodeId) -> &[NodeId] {
        &self.nodes[id.0].children
    }

    /// Parent of `id` (`None` for the root).
    pub fn parent(&self, id: NodeId) -> Option<NodeId> {
        self.nodes[id.0].parent
    }

    /// The nodes from the root down to `id` (both included).
    pub fn path_from_root(&self, id: NodeId) -> Vec<NodeId> {
        let mut path = vec![id];
        let mut at = id;
        while let Some(p) = self.parent(at) {
            path.push(p);
            at = p;
        }
        path.reverse();
        path
    }

    /// Nodes in breadth-first order from the root (parents before children; siblings in
    /// document order). Reversed, it visits children before parents.
    pub fn breadth_first(&self) -> Vec<NodeId> {
        let mut order = vec![self.root];
        let mut i = 0;
        while i < order.len() {
            order.extend_from_slice(&self.nodes[order[i].0].children);
            i += 1;
        }
        order
    }

    /// Nodes in depth-first pre-order (siblings in document order), with their depth.
    pub fn depth_first(&self) -> Vec<(NodeId, usize)> {
        let mut out = Vec::with_capacity(self.nodes.len());
        let mut stack = vec![(self.root, 0)];
        while let Some((id, d)) = stack.pop() {
            out.push((id, d));
            for &c in self.nodes[id.0].children.iter().rev() {
                stack.push((c, d + 1));
            }
        }
        out
    }

    /// Total number of application processes (ranks).
    pub fn num_ranks(&self) -> usize {
        self.rank_node.len()
    }

    /// The computing node hosting `rank`. Panics if `rank >= num_ranks()`.
    pub fn rank_node(&self, rank: usize) -> NodeId {
        self.rank_node[rank]
    }

    /// The CPUs of each rank's node (its `cpus` attribute), if every computing node lists
    /// them: where a run pins its ranks.
    pub fn rank_cpus(&self) -> Option<Vec<Vec<u32>>> {
        (0..self.num_ranks())
            .map(|r| {
                let node = self.node(self.rank_node(r));
                node.cpus.as_ref().map(|c| c.cpus().to_vec())
            })
            .collect()
    }

    /// The ranks hosted in the subtree of `id`, ascending.
    pub fn subtree_ranks(&self, id: NodeId) -> Vec<usize> {
        let mut ranks: Vec<usize> = (0..self.rank_node.len())
            .filter(|&r| {
                let mut at = Some(self.rank_node[r]);
                while let Some(a) = at {
                    if a == id {
                        return true;
                    }
                    at = self.parent(a);
                }
                false
            })
            .collect();
        ranks.sort_unstable();
        ranks
    }

    /// The computing nodes in document order (= rank order).
    pub fn computing_nodes(&self) -> impl Iterator<Item = &Node> {
        self.nodes.iter().filter(|n| n.kind.is_computing())
    }

    /// The link capacity C of node `id`: its own `bandwidth`, else the nearest ancestor's.
    pub fn link_bandwidth(&self, id: NodeId) -> Option<f64> {
        let mut at = Some(id);
        while let Some(a) = at {
            if let Some(b) = self.nodes[a.0].bandwidth {
                return Some(b);
            }
            at = self.parent(a);
        }
        None
    }

    /// The benchmark ratings of every processor (b_n repeated m times per computing node), for
    /// [`crate::metrics::h_cpu`]. `None` if some computing node has no `mflops`.
    pub fn processor_ratings(&self) -> Option<Vec<f64>> {
        let mut out = Vec::new();
        for n in self.computing_nodes() {
            let b = n.mflops?;
            out.extend(std::iter::repeat_n(b, n.processors()));
        }
        Some(out)
    }

    /// The benchmark ratings of the processors that run the application: b_n repeated
    /// min(k_n, m) times per computing node (k_n processes can keep at most k_n of its m CPUs
    /// busy, and k_n > m processes share m). These are the n processors of RC_ideal (DRUM 2005
    /// §4.1, [`crate::metrics::rc_ideal`]); [`Machine::processor_ratings`] lists every CPU, as
    /// H_cpu wants. `None` if some computing node has no `mflops`.
    pub fn application_processor_ratings(&self) -> Option<Vec<f64>> {
        let mut out = Vec::new();
        for n in self.computing_nodes() {
            let b = n.mflops?;
            out.extend(std::iter::repeat_n(b, n.processes().min(n.processors())));
        }
        Some(out)
    }

    /// Sets the benchmark rating b_n of a computing node (e.g. from [`crate::bench::calibrate`]).
    pub fn set_mflops(&mut self, id: NodeId, mflops: f64) -> Result<()> {
        if !(mflops.is_finite() && mflops > 0.0) {
            return Err(Error::Parameter(format!(
                "mflops must be finite and > 0, got {mflops}"
            )));
        }
        let node = &mut self.nodes[id.0];
        if !node.kind.is_computing() {
            return Err(Error::Parameter(format!(
                "{} is a network node",
                node.label()
            )));
        }
        node.mflops = Some(mflops);
        Ok(())
    }

    /// The machine as DrumHead XML (flat form with `parent=`, document order kept, unknown
    /// attributes written back). `Machine::parse_str(&m.to_xml(), ..)` gives back `m` up to
    /// source locations.
    pub fn to_xml(&self) -> String {
        let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<machinemodel");
        for a in &self.attrs {
            push_attr(&mut out, &a.name, &a.value);
        }
        out.push_str(">\n");
        for n in &self.nodes {
            out.push_str("  <node");
            push_attr(&mut out, "type", n.kind.as_str());
            push_attr(&mut out, "nodenum", &n.nodenum.to_string());
            push_attr(&mut out, "name", &n.name);
            if let Some(ip) = &n.ip {
                push_attr(&mut out, "IP", ip);
            }
            if let Some(m) = n.is_monitorable {
                push_attr(&mut out, "isMonitorable", if m { "true" } else { "false" });
            }
            let parent = n
                .parent
                .map_or("-1".to_string(), |p| self.node(p).nodenum.to_string());
            push_attr(&mut out, "parent", &parent);
            let nums = [
                ("imgx", n.img.0),
                ("imgy", n.img.1),
                ("numprocs", None),
                ("mflops", n.mflops),
                ("bandwidth", n.bandwidth),
                ("memory", n.memory),
            ];
            for (name, v) in nums {
                if name == "numprocs" {
                    if let NodeKind::MultipleComputing { numprocs } = n.kind {
                        push_attr(&mut out, "numprocs", &numprocs.to_string());
                    }
                } else if let Some(v) = v {
                    push_attr(&mut out, name, &v.to_string());
                }
            }
            if let Some(c) = &n.cpus {
                push_attr(&mut out, "cpus", &c.to_string());
            }
            if let Some(r) = n.ranks {
                push_attr(&mut out, "ranks", &r.to_string());
            }
            if let Some(l) = n.load {
                push_attr(&mut out, "load", &l.to_string());
            }
            for a in &n.extra {
                push_attr(&mut out, &a.name, &a.value);
            }
            match &n.lbmethod {
                None => out.push_str("/>\n"),
                Some(lb) => {
                    out.push_str(">\n    <lbmethod");
                    push_attr(&mut out, "lbm", lb.method.as_str());
                    for p in &lb.params {
                        push_attr(&mut out, &p.name, &p.value);
                    }
                    out.push_str("/>\n  </node>\n");
                }
            }
        }
        out.push_str("</machinemodel>\n");
        out
    }

    /// Compares two machines ignoring source names and locations (used by round-trip tests).
    pub fn same_model(&self, other: &Machine) -> bool {
        self.to_xml() == other.to_xml()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_splitting_node_gets_the_override() {
        let mut m = Machine::parse_str(
            r#"<machinemodel>
  <node type="NETWORK" nodenum="0" name="sw" parent="-1"><lbmethod lbm="RCB" IMBALANCE_TOL="1.2" METHOD="x"/></node>
  <node type="MULTIPLE_COMPUTING" nodenum="1" name="smp" parent="0" numprocs="2"/>
  <node type="SINGLE_COMPUTING" nodenum="2" name="one" parent="0"/>
</machinemodel>"#,
            "o.xml",
        )
        .unwrap();
        m.set_every_lbmethod(
            PartitionMethod::Diffusion,
            &[("METHOD", "gde")],
            "--transfer",
        );
        let kinds: Vec<_> = m.nodes().iter().map(|n| n.lbmethod.as_ref()).collect();
        for k in &kinds[..2] {
            let lb = k.unwrap();
            assert_eq!(lb.method, PartitionMethod::Diffusion);
            assert_eq!(lb.param("METHOD"), Some("gde"));
            assert_eq!(
                lb.params.last().unwrap().location.to_string(),
                "--transfer:0:0"
            );
        }
        // The node's own other parameters stay.
        let root = kinds[0].unwrap();
        assert_eq!(root.params.len(), 2);
        assert_eq!(root.param("IMBALANCE_TOL"), Some("1.2"));
        assert!(kinds[2].is_none());
        // It writes and reads back.
        let again = Machine::parse_str(&m.to_xml(), "again.xml").unwrap();
        assert_eq!(
            again.nodes()[1].lbmethod.as_ref().unwrap().method,
            PartitionMethod::Diffusion
        );
    }

    #[test]
    fn cpu_lists_parse_and_print() {
        let c = CpuList::parse("3, 0-1").unwrap();
        assert_eq!(c.cpus(), &[0, 1, 3]);
        assert_eq!(c.to_string(), "0-1,3");
        assert_eq!(CpuList::parse("0-3,5-6").unwrap().to_string(), "0-3,5-6");
        assert!(CpuList::parse("").is_err());
        assert!(CpuList::parse("1,1").unwrap_err().contains("twice"));
        assert!(CpuList::parse("3-1").unwrap_err().contains("backwards"));
        assert!(CpuList::parse("x").is_err());
        assert!(CpuList::parse("0-99999999").unwrap_err().contains("beyond"));
    }
}
