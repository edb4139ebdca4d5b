//! Stage 2 of loading: the raw document ([`crate::xml`]) into a validated [`Machine`]. Each
//! step is one function: read every node's attributes ([`read_node`]), link the parents
//! ([`link_parents`]), refuse cycles ([`check_acyclic`]), attach the children
//! ([`attach_children`]) and number the ranks ([`number_ranks`]). Every error names its
//! `FILE:LINE:COL`.

use crate::error::{Error, Location, Problem, Result};
use crate::machine::{
    CpuList, LbMethod, MAX_CPU, MAX_MACHINE_FILE_BYTES, MAX_RANKS, Machine, Node, NodeId, NodeKind,
    PartitionMethod,
};
use crate::xml::{self, Attribute, RawDocument, RawLbMethod, RawNode};
use std::collections::HashMap;
use std::path::Path;

// Loading: stage 1 (`xml::parse`), then stage 2 (`validate`).
impl Machine {
    /// Reads and validates a machine file. Errors are `FILE:LINE:COL: message`; a file over
    /// [`MAX_MACHINE_FILE_BYTES`] is refused before it is read whole.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Machine> {
        let path = path.as_ref();
        let bytes = part_api::file::read_bounded(path, MAX_MACHINE_FILE_BYTES, "a machine file")
            .map_err(|error| Error::Io {
                path: path.to_path_buf(),
                error,
            })?;
        Machine::from_bytes(&bytes, &path.display().to_string())
    }

    /// Validates a machine description held in memory; `source` names it in errors.
    pub fn from_bytes(bytes: &[u8], source: &str) -> Result<Machine> {
        let text = xml::utf8(source, bytes)?;
        Machine::parse_str(text, source)
    }

    /// Validates XML text; `source` names it in errors. Never panics, whatever the text.
    pub fn parse_str(text: &str, source: &str) -> Result<Machine> {
        let doc = xml::parse(source, text)?;
        validate(source, doc)
    }
}

fn invalid(location: &Location, problem: Problem) -> Error {
    Error::Invalid {
        location: location.clone(),
        problem,
    }
}

struct Attrs<'a> {
    element: &'static str,
    at: &'a Location,
    list: &'a [Attribute],
}

impl<'a> Attrs<'a> {
    fn get(&self, name: &str) -> Option<&'a Attribute> {
        self.list.iter().find(|a| a.name == name)
    }

    fn require(&self, name: &'static str) -> Result<&'a Attribute> {
        self.get(name).ok_or_else(|| {
            invalid(
                self.at,
                Problem::MissingAttribute {
                    attr: name,
                    element: self.element,
                },
            )
        })
    }
}

fn bad_value(a: &Attribute, expected: &'static str) -> Error {
    invalid(
        &a.location,
        Problem::BadValue {
            attr: a.name.clone(),
            value: a.value.clone(),
            expected,
        },
    )
}

fn out_of_range(a: &Attribute, expected: &'static str) -> Error {
    invalid(
        &a.location,
        Problem::OutOfRange {
            attr: a.name.clone(),
            value: a.value.clone(),
            expected,
        },
    )
}

/// A finite number; `positive` demands > 0, otherwise >= 0.
fn number(a: &Attribute, positive: bool) -> Result<f64> {
    let v: f64 = a
        .value
        .trim()
        .parse()
        .map_err(|_| bad_value(a, "a number"))?;
    if !v.is_finite() {
        return Err(out_of_range(a, "a finite number"));
    }
    if positive && v <= 0.0 {
        return Err(out_of_range(a, "a number > 0"));
    }
    if v < 0.0 {
        return Err(out_of_range(a, "a number >= 0"));
    }
    Ok(v)
}

/// A positive integer that fits in u32.
fn count(a: &Attribute) -> Result<u32> {
    let t = a.value.trim();
    match t.parse::<i64>() {
        Ok(v) if v >= 1 && v <= u32::MAX as i64 => Ok(v as u32),
        Ok(_) => Err(out_of_range(a, "a whole number >= 1")),
        Err(_) if t.parse::<f64>().is_ok() => Err(bad_value(a, "a whole number")),
        Err(_) => Err(bad_value(a, "a whole number")),
    }
}

/// A whole number in `1..=max`: one over it, however large (past 2^64 too), is out of range
/// with `over` (the limit, as the error says it), not a bad number.
fn count_at_most(a: &Attribute, max: usize, over: &'static str) -> Result<usize> {
    match a.value.trim().parse::<u64>() {
        Ok(v) if v > max as u64 => Err(out_of_range(a, over)),
        Err(e) if *e.kind() == std::num::IntErrorKind::PosOverflow => Err(out_of_range(a, over)),
        _ => count(a).map(|v| v as usize),
    }
}

/// A node number: a whole number in 0..2^32 (or -1 for `parent`, when `allow_root`).
fn nodenum(a: &Attribute, allow_root: bool) -> Result<Option<u32>> {
    let t = a.value.trim();
    let v: i64 = t.parse().map_err(|_| bad_value(a, "a whole node number"))?;
    if allow_root && v == -1 {
        return Ok(None);
    }
    if v < 0 || v > u32::MAX as i64 {
        return Err(out_of_range(
            a,
            if allow_root {
                "a node number >= 0, or -1 for the root"
            } else {
                "a node number >= 0"
            },
        ));
    }
    Ok(Some(v as u32))
}

const KNOWN: &[&str] = &[
    "type",
    "nodenum",
    "name",
    "IP",
    "isMonitorable",
    "parent",
    "imgx",
    "imgy",
    "numprocs",
    "mflops",
    "bandwidth",
    "memory",
    "cpus",
    "ranks",
    "load",
];

/// Per-node facts needed after the first pass.
struct Pending {
    node: Node,
    parent_num: Option<u32>, // None = root
    parent_at: Location,
}

pub(crate) fn validate(source: &str, doc: RawDocument) -> Result<Machine> {
    let mut pending: Vec<Pending> = Vec::with_capacity(doc.nodes.len());
    let mut by_num: HashMap<u32, usize> = HashMap::new();
    for (i, raw) in doc.nodes.iter().enumerate() {
        // The number first: a duplicate is reported before the node's other attributes.
        let attrs = Attrs::of_node(raw);
        attrs.require("type")?;
        let num_attr = attrs.require("nodenum")?;
        let num = nodenum(num_attr, false)?.expect("no root allowed here");
        if let Some(&first) = by_num.get(&num) {
            return Err(invalid(
                &num_attr.location,
                Problem::DuplicateNodenum {
                    nodenum: num,
                    first: doc.nodes[first].location.clone(),
                },
            ));
        }
        by_num.insert(num, i);
        let enclosing = raw.enclosing.map(|e| pending[e].node.nodenum);
        pending.push(read_node(raw, NodeId(i), enclosing)?);
    }
    let (root, parents) = link_parents(&pending, &by_num, &doc.location)?;
    check_acyclic(&pending, &parents, root)?;
    attach_children(&mut pending, &parents)?;
    let nodes: Vec<Node> = pending.into_iter().map(|p| p.node).collect();
    let (nodes, rank_node) = number_ranks(nodes)?;
    Ok(Machine {
        source: source.to_string(),
        location: doc.location,
        attrs: doc.attrs,
        nodes,
        root: NodeId(root),
        rank_node,
    })
}

impl<'a> Attrs<'a> {
    fn of_node(raw: &'a RawNode) -> Attrs<'a> {
        Attrs {
            element: "node",
            at: &raw.location,
            list: &raw.attrs,
        }
    }
}

/// One `<node>`: its attributes read and checked, its parent number (`None`: the root) as the
/// file gives it (`enclosing`: the number of the node it is nested in, if any).
fn read_node(raw: &RawNode, id: NodeId, enclosing: Option<u32>) -> Result<Pending> {
    let attrs = Attrs::of_node(raw);
    let ty = attrs.require("type")?;
    let num_attr = attrs.require("nodenum")?;
    let num = nodenum(num_attr, false)?.expect("no root allowed here");
    let numprocs = attrs
        .get("numprocs")
        .map(|a| count_at_most(a, MAX_CPU as usize, "at most 65536 processors"))
        .transpose()?
        .map(|n| n as u32);
    let kind = match ty.value.trim() {
        "NETWORK" => NodeKind::Network,
        "SINGLE_COMPUTING" => NodeKind::SingleComputing,
        "MULTIPLE_COMPUTING" => NodeKind::MultipleComputing {
            numprocs: numprocs.ok_or_else(|| {
                invalid(
                    &raw.location,
                    Problem::MissingAttribute {
                        attr: "numprocs",
                        element: "node",
                    },
                )
            })?,
        },
        other => {
            return Err(invalid(
                &ty.location,
                Problem::UnknownNodeType(other.to_string()),
            ));
        }
    };
    let (parent_num, parent_at) = parent_of(&attrs, raw, num, enclosing)?;
    let opt_num = |name: &str, positive: bool| -> Result<Option<f64>> {
        attrs.get(name).map(|a| number(a, positive)).transpose()
    };
    // In this order, so that of two bad attributes the same one is reported as always.
    let img = (opt_num("imgx", false)?, opt_num("imgy", false)?);
    let mflops = opt_num("mflops", true)?;
    let bandwidth = opt_num("bandwidth", true)?;
    let memory = opt_num("memory", true)?;
    let ranks = attrs
        .get("ranks")
        .map(|a| {
            count_at_most(
                a,
                MAX_RANKS,
                "at most 1048576 processes (the limit of a machine)",
            )
        })
        .transpose()?
        .map(|n| n as u32);
    let cpus = cpus_of(&attrs)?;
    let load = attrs
        .get("load")
        .map(|a| {
            count_at_most(
                a,
                crate::load::MAX_LOAD_PER_RANK,
                "at most 64 competing processes (the limit per rank)",
            )
        })
        .transpose()?
        .map(|n| n as u32);
    let is_monitorable = monitorable_of(&attrs)?;
    check_kind_rules(&attrs, kind, numprocs, cpus.as_ref())?;
    if let Some(a) = attrs.get("load")
        && cpus.is_none()
        && kind.is_computing()
    {
        return Err(invalid(
            &a.location,
            Problem::NotAllowed {
                attr: "load".into(),
                why: "a load is pinned to the node's CPUs: give `cpus` too",
            },
        ));
    }
    let name = attrs
        .get("name")
        .map(|a| a.value.clone())
        .unwrap_or_default();
    let lbmethod = match &raw.lbmethod {
        None => None,
        Some(lb) => Some(lbmethod_of(lb, &format!("node {num} ({name:?})"))?),
    };
    let node = Node {
        id,
        nodenum: num,
        kind,
        name,
        ip: attrs.get("IP").map(|a| a.value.clone()),
        is_monitorable,
        img,
        mflops,
        bandwidth,
        memory,
        cpus,
        ranks,
        load,
        lbmethod,
        extra: raw
            .attrs
            .iter()
            .filter(|a| !KNOWN.contains(&a.name.as_str()))
            .cloned()
            .collect(),
        location: raw.location.clone(),
        parent: None,
        children: Vec::new(),
        first_rank: 0,
    };
    Ok(Pending {
        node,
        parent_num,
        parent_at,
    })
}

/// The parent of node `num`: explicit (`parent=`), or implied by nesting in node `enclosing`
/// (both must agree); with where the file says so.
fn parent_of(
    attrs: &Attrs<'_>,
    raw: &RawNode,
    num: u32,
    enclosing: Option<u32>,
) -> Result<(Option<u32>, Location)> {
    Ok(match (attrs.get("parent"), enclosing) {
        (Some(p), None) => (nodenum(p, true)?, p.location.clone()),
        (Some(p), Some(enc)) => match nodenum(p, true)? {
            Some(pn) if pn == enc => (Some(pn), p.location.clone()),
            Some(pn) => {
                return Err(invalid(
                    &p.location,
                    Problem::ParentMismatch {
                        nodenum: num,
                        parent: pn,
                        enclosing: enc,
                    },
                ));
            }
            None => {
                return Err(invalid(
                    &p.location,
                    Problem::Inconsistent(format!(
                        "node {num} says parent=\"-1\" (root) but is nested inside node {enc}"
                    )),
                ));
            }
        },
        (None, Some(enc)) => (Some(enc), raw.location.clone()),
        (None, None) => {
            return Err(invalid(
                &raw.location,
                Problem::MissingAttribute {
                    attr: "parent",
                    element: "node",
                },
            ));
        }
    })
}

/// `cpus`, if given.
fn cpus_of(attrs: &Attrs<'_>) -> Result<Option<CpuList>> {
    let Some(a) = attrs.get("cpus") else {
        return Ok(None);
    };
    CpuList::parse(&a.value).map(Some).map_err(|why| {
        invalid(
            &a.location,
            Problem::BadValue {
                attr: "cpus".into(),
                value: a.value.clone(),
                expected: match why.as_str() {
                    _ if why.contains("twice") => "a CPU list without repeats",
                    _ if why.contains("backwards") => "ranges like 0-3, low to high",
                    _ if why.contains("beyond") => "CPU numbers below 65536",
                    _ => "a CPU list such as 0-1,3",
                },
            },
        )
    })
}

/// `isMonitorable`, if given.
fn monitorable_of(attrs: &Attrs<'_>) -> Result<Option<bool>> {
    match attrs.get("isMonitorable") {
        None => Ok(None),
        Some(a) => match a.value.trim() {
            "true" | "1" => Ok(Some(true)),
            "false" | "0" => Ok(Some(false)),
            _ => Err(bad_value(a, "true or false")),
        },
    }
}

/// The rules of each node type: a network node runs no process; a single-computing node has
/// one processor; a multiple-computing node's `cpus` match its `numprocs`.
fn check_kind_rules(
    attrs: &Attrs<'_>,
    kind: NodeKind,
    numprocs: Option<u32>,
    cpus: Option<&CpuList>,
) -> Result<()> {
    match kind {
        NodeKind::Network => {
            for name in ["mflops", "cpus", "ranks", "numprocs", "memory", "load"] {
                if let Some(a) = attrs.get(name) {
                    return Err(invalid(
                        &a.location,
                        Problem::NotAllowed {
                            attr: name.into(),
                            why: "a NETWORK node runs no process",
                        },
                    ));
                }
            }
        }
        NodeKind::SingleComputing => {
            if let Some(a) = attrs.get("numprocs")
                && numprocs != Some(1)
            {
                return Err(out_of_range(a, "1 on a SINGLE_COMPUTING node"));
            }
            if let (Some(c), Some(a)) = (cpus, attrs.get("cpus"))
                && c.len() != 1
            {
                return Err(out_of_range(a, "one CPU on a SINGLE_COMPUTING node"));
            }
        }
        NodeKind::MultipleComputing { numprocs } => {
            if let (Some(c), Some(a)) = (cpus, attrs.get("cpus"))
                && c.len() != numprocs as usize
            {
                return Err(invalid(
                    &a.location,
                    Problem::Inconsistent(format!(
                        "`cpus` lists {} CPUs but numprocs is {numprocs}",
                        c.len()
                    )),
                ));
            }
        }
    }
    Ok(())
}

/// A node's `<lbmethod>`: the method name is part of the format (an unknown one is an error
/// naming `node`, the node as `node 3 ("name")`); the parameters are kept for the partitioner.
fn lbmethod_of(lb: &RawLbMethod, node: &str) -> Result<LbMethod> {
    let la = Attrs {
        element: "lbmethod",
        at: &lb.location,
        list: &lb.attrs,
    };
    let lbm = la.require("lbm")?;
    if lbm.value.trim().is_empty() {
        return Err(bad_value(lbm, "a method name such as HSFC, RCB or RIB"));
    }
    let method = PartitionMethod::parse(&lbm.value).ok_or_else(|| {
        invalid(
            &lbm.location,
            Problem::UnknownLbMethod {
                node: node.to_string(),
                method: lbm.value.trim().to_string(),
            },
        )
    })?;
    Ok(LbMethod {
        method,
        method_location: lbm.location.clone(),
        params: lb
            .attrs
            .iter()
            .filter(|a| a.name != "lbm")
            .cloned()
            .collect(),
        location: lb.location.clone(),
    })
}

/// Every named parent exists and exactly one node is the root: the root's index and each
/// node's parent index.
fn link_parents(
    pending: &[Pending],
    by_num: &HashMap<u32, usize>,
    doc_at: &Location,
) -> Result<(usize, Vec<Option<usize>>)> {
    let mut root: Option<usize> = None;
    let mut parents: Vec<Option<usize>> = Vec::with_capacity(pending.len());
    for (i, p) in pending.iter().enumerate() {
        match p.parent_num {
            None => {
                if let Some(r) = root {
                    return Err(invalid(
                        &p.parent_at,
                        Problem::TwoRoots {
                            first: pending[r].node.nodenum,
                            second: p.node.nodenum,
                        },
                    ));
                }
                root = Some(i);
                parents.push(None);
            }
            Some(pn) => match by_num.get(&pn) {
                Some(&j) => parents.push(Some(j)),
                None => {
                    return Err(invalid(
                        &p.parent_at,
                        Problem::MissingParent {
                            nodenum: p.node.nodenum,
                            parent: pn,
                        },
                    ));
                }
            },
        }
    }
    let Some(root) = root else {
        let at = pending.first().map_or(doc_at, |p| &p.node.location);
        return Err(invalid(at, Problem::NoRoot));
    };

    Ok((root, parents))
}

/// Every node reaches the root by parent links (a walk with a three-colour mark); else the
/// error names the cycle from its first node in document order.
fn check_acyclic(pending: &[Pending], parents: &[Option<usize>], root: usize) -> Result<()> {
    let n = pending.len();
    let mut state = vec![0u8; n]; // 0 unknown, 1 on current walk, 2 reaches root
    state[root] = 2;
    for start in 0..n {
        let mut walk = Vec::new();
        let mut at = start;
        while state[at] == 0 {
            state[at] = 1;
            walk.push(at);
            at = parents[at].expect("only the root has no parent");
        }
        if state[at] == 1 {
            // `at` is on the current walk: the cycle is walk[pos..].
            let pos = walk.iter().position(|&w| w == at).expect("on the walk");
            let cycle: Vec<usize> = walk[pos..].to_vec();
            let first = *cycle.iter().min().expect("non-empty");
            let nums: Vec<u32> = {
                // Start the printed cycle at its first node in document order.
                let k = cycle.iter().position(|&c| c == first).expect("present");
                cycle[k..]
                    .iter()
                    .chain(&cycle[..k])
                    .map(|&c| pending[c].node.nodenum)
                    .collect()
            };
            return Err(invalid(&pending[first].parent_at, Problem::Cycle(nums)));
        }
        for w in walk {
            state[w] = 2;
        }
    }

    Ok(())
}

/// Children in document order; computing nodes are leaves and network nodes are not.
fn attach_children(pending: &mut [Pending], parents: &[Option<usize>]) -> Result<()> {
    let n = pending.len();
    for i in 0..n {
        if let Some(p) = parents[i] {
            if pending[p].node.kind.is_computing() {
                return Err(invalid(
                    &pending[i].node.location,
                    Problem::ComputingHasChildren {
                        nodenum: pending[p].node.nodenum,
                        child: pending[i].node.nodenum,
                    },
                ));
            }
            pending[i].node.parent = Some(NodeId(p));
            pending[p].node.children.push(NodeId(i));
        }
    }
    for p in pending.iter() {
        if !p.node.kind.is_computing() && p.node.children.is_empty() {
            return Err(invalid(
                &p.node.location,
                Problem::NetworkLeaf(p.node.nodenum),
            ));
        }
    }

    Ok(())
}

/// Ranks in document order of the computing nodes, `Node::processes` each: every node's first
/// rank, and the node of every rank.
fn number_ranks(mut nodes: Vec<Node>) -> Result<(Vec<Node>, Vec<NodeId>)> {
    let mut rank_node = Vec::new();
    for node in &mut nodes {
        if node.kind.is_computing() {
            let k = node.processes();
            if rank_node.len() + k > MAX_RANKS {
                return Err(invalid(
                    &node.location,
                    Problem::Inconsistent(format!(
                        "the machine declares more than {MAX_RANKS} processes"
                    )),
                ));
            }
            node.first_rank = rank_node.len();
            rank_node.extend(std::iter::repeat_n(node.id, k));
        }
    }

    Ok((nodes, rank_node))
}
