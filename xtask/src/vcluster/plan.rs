//! What `vcluster up` makes of a machine file, as data: the namespaces, bridges, links,
//! addresses and shaping, and the `ip`/`tc` commands that make them. Pure (no system calls),
//! so the tests check it without root.
//!
//! The picture: every object lives inside a namespace of our own, nothing in the host's.
//! - `drumvc--sw`, the switch: one bridge `dvcb<nodenum>` per network node of the machine;
//!   a non-root network node's bridge hangs off its parent's through a veth pair
//!   `dvcu<nodenum>`/`dvcd<nodenum>`, shaped to the node's `bandwidth` when that is below the
//!   link bandwidth of one of its children (a slow uplink between its subtree and the rest);
//! - `drumvc-<name>` per computing node, with the node's `name` as its hostname (a UTS
//!   namespace) and one interface `eth0` on the parent's bridge (switch side `dvcn<nodenum>`),
//!   shaped in both directions (tbf on both ends) to the node's link bandwidth
//!   (`Machine::link_bandwidth`: its own `bandwidth`, else the nearest ancestor's; none:
//!   unshaped);
//! - `drumvc--head`, outside the compute nodes: where mpirun runs and the `--net-load` sink
//!   listens, on the root bridge, unshaped.
//!
//! One IPv4 subnet [`SUBNET`]/16 spans the bridges (they form one Ethernet segment): the head
//! is .0.1, computing node k (in rank order) is the (k+2)-th address.

use anyhow::{Context, Result, bail};
use std::net::Ipv4Addr;

/// The prefix of every namespace, file and interface `vcluster` makes.
pub(crate) const PREFIX: &str = "drumvc";
/// The switch namespace.
pub(crate) const SWITCH_NS: &str = "drumvc--sw";
/// The head namespace (mpirun, the flows' sink).
pub(crate) const HEAD_NS: &str = "drumvc--head";
/// The head's hostname.
pub(crate) const HEAD_HOST: &str = "drumvc-head";
/// The first address of the cluster's /16.
pub(crate) const SUBNET: Ipv4Addr = Ipv4Addr::new(10, 213, 0, 0);
/// The interface of a node (and of the head) inside its namespace.
pub(crate) const NODE_IF: &str = "eth0";

/// A node of the machine file as `drum check --json` gives it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct MachineNode {
    pub(crate) nodenum: u32,
    pub(crate) name: String,
    pub(crate) computing: bool,
    pub(crate) parent: Option<u32>,
    pub(crate) bandwidth: Option<f64>,
    pub(crate) cpus: Option<Vec<u32>>,
    /// Its ranks, `first..end`.
    pub(crate) ranks: (usize, usize),
}

/// Reads `drum check --json` output.
pub(crate) fn parse_machine(json: &str) -> Result<Vec<MachineNode>> {
    let v: serde_json::Value = serde_json::from_str(json).context("drum check --json")?;
    let nodes = v["nodes"]
        .as_array()
        .context("drum check --json: no `nodes`")?;
    nodes
        .iter()
        .map(|n| {
            let num = |x: &serde_json::Value| x.as_u64().and_then(|x| u32::try_from(x).ok());
            let ranks = n["ranks"].as_array().context("node without ranks")?;
            let rank = |i: usize| -> Result<usize> {
                Ok(ranks.get(i).and_then(|r| r.as_u64()).context("bad ranks")? as usize)
            };
            Ok(MachineNode {
                nodenum: num(&n["nodenum"]).context("node without nodenum")?,
                name: n["name"].as_str().unwrap_or_default().to_string(),
                computing: n["type"].as_str() != Some("NETWORK"),
                parent: num(&n["parent"]),
                bandwidth: n["bandwidth"].as_f64(),
                cpus: n["cpus"]
                    .as_array()
                    .map(|c| c.iter().filter_map(num).collect()),
                ranks: (rank(0)?, rank(1)?),
            })
        })
        .collect()
}

/// A computing node as a namespace.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct NodePlan {
    pub(crate) nodenum: u32,
    /// Its hostname: the node's `name`.
    pub(crate) host: String,
    pub(crate) netns: String,
    pub(crate) ip: Ipv4Addr,
    /// The switch side of its veth pair.
    pub(crate) port: String,
    /// The bridge it hangs off (its parent's).
    pub(crate) bridge: String,
    /// Its link's rate, Mbit/s (`None`: unshaped).
    pub(crate) rate_mbit: Option<f64>,
    pub(crate) cpus: Option<Vec<u32>>,
    /// Its ranks, `first..end` (the hostfile's slots).
    pub(crate) ranks: (usize, usize),
}

/// A network node as a bridge, with its uplink to its parent's bridge.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct BridgePlan {
    pub(crate) nodenum: u32,
    pub(crate) name: String,
    pub(crate) dev: String,
    /// (its side, the parent's side, the parent's bridge, the rate if shaped).
    pub(crate) uplink: Option<(String, String, String, Option<f64>)>,
}

/// The whole cluster.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Plan {
    pub(crate) bridges: Vec<BridgePlan>,
    /// Computing nodes in rank order.
    pub(crate) nodes: Vec<NodePlan>,
    pub(crate) head_ip: Ipv4Addr,
    /// The root's bridge (where the head hangs).
    pub(crate) root_bridge: String,
}

/// Whether `name` can be a hostname: 1 to 63 letters, digits, `-` and `.`, starting and
/// ending with a letter or digit.
fn valid_host(name: &str) -> bool {
    let ends = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    (1..=63).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.')
        && ends(name.chars().next())
        && ends(name.chars().last())
}

/// The `k`-th address of the subnet.
fn address(k: usize) -> Result<Ipv4Addr> {
    let k = u32::try_from(k).ok().filter(|&k| k < 65_534);
    let k = k.context("more than 65,532 computing nodes do not fit in one /16")?;
    Ok(Ipv4Addr::from(u32::from(SUBNET) + k))
}

impl Plan {
    /// The plan of `nodes` (`machine` names the file in errors).
    pub(crate) fn new(machine: &str, nodes: &[MachineNode]) -> Result<Plan> {
        let by_num = |n: u32| nodes.iter().find(|x| x.nodenum == n);
        let link = |n: &MachineNode| -> Option<f64> {
            let mut at = Some(n);
            while let Some(a) = at {
                if a.bandwidth.is_some() {
                    return a.bandwidth;
                }
                at = a.parent.and_then(by_num);
            }
            None
        };
        let mut plan = Plan {
            bridges: Vec::new(),
            nodes: Vec::new(),
            head_ip: address(1)?,
            root_bridge: String::new(),
        };
        for n in nodes.iter().filter(|n| !n.computing) {
            let dev = format!("dvcb{}", n.nodenum);
            let uplink = match n.parent.and_then(by_num) {
                None => {
                    plan.root_bridge = dev.clone();
                    None
                }
                Some(p) => {
                    let fastest_child = nodes
                        .iter()
                        .filter(|c| c.parent == Some(n.nodenum))
                        .filter_map(link)
                        .fold(0.0, f64::max);
                    let rate = n.bandwidth.filter(|&b| b < fastest_child);
                    Some((
                        format!("dvcu{}", n.nodenum),
                        format!("dvcd{}", n.nodenum),
                        format!("dvcb{}", p.nodenum),
                        rate,
                    ))
                }
            };
            plan.bridges.push(BridgePlan {
                nodenum: n.nodenum,
                name: n.name.clone(),
                dev,
                uplink,
            });
        }
        if plan.root_bridge.is_empty() {
            bail!("{machine}: the root is a computing node; vcluster needs a network node on top");
        }
        for (k, n) in nodes.iter().filter(|n| n.computing).enumerate() {
            if !valid_host(&n.name) {
                bail!(
                    "{machine}: node {} is named {:?}; vcluster makes it a host of that name, so \
                     the name must be 1 to 63 letters, digits, '-' and '.'",
                    n.nodenum,
                    n.name
                );
            }
            if plan.nodes.iter().any(|m| m.host == n.name) || n.name == HEAD_HOST {
                bail!(
                    "{machine}: two hosts would be named {:?} (node {}); vcluster needs distinct \
                     names (and not {HEAD_HOST:?})",
                    n.name,
                    n.nodenum
                );
            }
            let parent = n
                .parent
                .and_then(by_num)
                .context("a computing node without parent")?;
            plan.nodes.push(NodePlan {
                nodenum: n.nodenum,
                host: n.name.clone(),
                netns: format!("{PREFIX}-{}", n.name),
                ip: address(k + 2)?,
                port: format!("dvcn{}", n.nodenum),
                bridge: format!("dvcb{}", parent.nodenum),
                rate_mbit: link(n),
                cpus: n.cpus.clone(),
                ranks: n.ranks,
            });
        }
        if plan.nodes.is_empty() {
            bail!("{machine}: no computing node");
        }
        Ok(plan)
    }

    /// The namespaces, head and switch first.
    pub(crate) fn namespaces(&self) -> Vec<String> {
        let mut out = vec![SWITCH_NS.to_string(), HEAD_NS.to_string()];
        out.extend(self.nodes.iter().map(|n| n.netns.clone()));
        out
    }

    /// The hostnames of the namespaces with one (head and nodes).
    pub(crate) fn hosts(&self) -> Vec<(String, String)> {
        let mut out = vec![(HEAD_NS.to_string(), HEAD_HOST.to_string())];
        out.extend(self.nodes.iter().map(|n| (n.netns.clone(), n.host.clone())));
        out
    }

    /// The commands that build the network once the namespaces exist, in order: bridges,
    /// uplinks, the head's link, the nodes' links, each shaped link's qdiscs.
    pub(crate) fn commands(&self) -> Vec<Vec<String>> {
        let mut out: Vec<Vec<String>> = Vec::new();
        let mut cmd = |args: &[&str]| out.push(args.iter().map(|s| s.to_string()).collect());
        let sw = SWITCH_NS;
        for b in &self.bridges {
            cmd(&["ip", "-n", sw, "link", "add", &b.dev, "type", "bridge"]);
            cmd(&["ip", "-n", sw, "link", "set", &b.dev, "up"]);
        }
        for b in &self.bridges {
            let Some((own, parent_side, parent, rate)) = &b.uplink else {
                continue;
            };
            cmd(&[
                "ip",
                "-n",
                sw,
                "link",
                "add",
                own,
                "type",
                "veth",
                "peer",
                "name",
                parent_side,
            ]);
            for (dev, master) in [(own, &b.dev), (parent_side, parent)] {
                cmd(&["ip", "-n", sw, "link", "set", dev, "master", master]);
                cmd(&["ip", "-n", sw, "link", "set", dev, "up"]);
                if let Some(r) = rate {
                    cmd(&tbf(sw, dev, *r)
                        .iter()
                        .map(String::as_str)
                        .collect::<Vec<_>>());
                }
            }
        }
        let mut attach = |ns: &str, port: &str, bridge: &str, ip: Ipv4Addr, rate: Option<f64>| {
            let ip = format!("{ip}/16");
            let peer = [
                "ip", "-n", sw, "link", "add", port, "type", "veth", "peer", "name", NODE_IF,
                "netns", ns,
            ];
            cmd(&peer);
            cmd(&["ip", "-n", sw, "link", "set", port, "master", bridge]);
            cmd(&["ip", "-n", sw, "link", "set", port, "up"]);
            cmd(&["ip", "-n", ns, "addr", "add", &ip, "dev", NODE_IF]);
            cmd(&["ip", "-n", ns, "link", "set", NODE_IF, "up"]);
            cmd(&["ip", "-n", ns, "link", "set", "lo", "up"]);
            if let Some(r) = rate {
                for (ns, dev) in [(sw, port), (ns, NODE_IF)] {
                    cmd(&tbf(ns, dev, r)
                        .iter()
                        .map(String::as_str)
                        .collect::<Vec<_>>());
                }
            }
        };
        attach(HEAD_NS, "dvch", &self.root_bridge, self.head_ip, None);
        for n in &self.nodes {
            attach(&n.netns, &n.port, &n.bridge, n.ip, n.rate_mbit);
        }
        out
    }

    /// The hostfile for mpirun: one line per node, `host slots=ranks`, in rank order (mpirun
    /// fills the slots in order, so rank r lands on the node the machine gives it).
    pub(crate) fn hostfile(&self) -> String {
        self.nodes
            .iter()
            .map(|n| format!("{} slots={}\n", n.host, n.ranks.1 - n.ranks.0))
            .collect()
    }
}

/// `tc qdisc replace dev DEV root tbf` shaping egress to `mbit` Mbit/s: a bucket of 10 ms at
/// the rate (at least 16 KiB: a few full frames) and at most 50 ms of queue.
pub(crate) fn tbf(ns: &str, dev: &str, mbit: f64) -> Vec<String> {
    let kbit = (mbit * 1000.0).round().max(8.0) as u64;
    let burst = (kbit * 1000 / 8 / 100).max(16 * 1024);
    [
        "tc",
        "-n",
        ns,
        "qdisc",
        "replace",
        "dev",
        dev,
        "root",
        "tbf",
        "rate",
        &format!("{kbit}kbit"),
        "burst",
        &burst.to_string(),
        "latency",
        "50ms",
    ]
    .map(String::from)
    .to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(num: u32, name: &str, parent: Option<u32>, bw: Option<f64>) -> MachineNode {
        MachineNode {
            nodenum: num,
            name: name.into(),
            computing: false,
            parent,
            bandwidth: bw,
            cpus: None,
            ranks: (0, 0),
        }
    }

    fn computing(num: u32, name: &str, parent: u32, bw: Option<f64>, r: usize) -> MachineNode {
        MachineNode {
            computing: true,
            cpus: Some(vec![r as u32 % 2]),
            ranks: (r, r + 1),
            ..node(num, name, Some(parent), bw)
        }
    }

    /// vcluster-sites.xml: two sites at 10 Mbit/s of two 100 Mbit/s nodes each.
    fn sites() -> Vec<MachineNode> {
        vec![
            node(0, "wan", None, None),
            node(1, "site-a", Some(0), Some(10.0)),
            computing(3, "a1", 1, Some(100.0), 0),
            computing(4, "a2", 1, Some(100.0), 1),
            node(2, "site-b", Some(0), Some(10.0)),
            computing(5, "b1", 2, Some(100.0), 2),
            computing(6, "b2", 2, None, 3),
        ]
    }

    #[test]
    fn sites_become_bridges_with_slow_uplinks() {
        let p = Plan::new("sites.xml", &sites()).unwrap();
        assert_eq!(p.root_bridge, "dvcb0");
        let up: Vec<_> = p.bridges.iter().map(|b| b.uplink.clone()).collect();
        assert_eq!(up[0], None);
        assert_eq!(
            up[1],
            Some(("dvcu1".into(), "dvcd1".into(), "dvcb0".into(), Some(10.0)))
        );
        let hosts: Vec<_> = p
            .nodes
            .iter()
            .map(|n| (n.host.as_str(), n.ip.to_string()))
            .collect();
        assert_eq!(
            hosts,
            [
                ("a1", "10.213.0.2".to_string()),
                ("a2", "10.213.0.3".into()),
                ("b1", "10.213.0.4".into()),
                ("b2", "10.213.0.5".into())
            ]
        );
        // b2 has no bandwidth of its own: its link is its site's, 10 Mbit/s; the site is then
        // not slower than its fastest child (b1 at 100), so its uplink stays shaped.
        assert_eq!(p.nodes[3].rate_mbit, Some(10.0));
        assert_eq!(
            (p.nodes[3].bridge.as_str(), p.nodes[3].netns.as_str()),
            ("dvcb2", "drumvc-b2")
        );
        assert_eq!(
            p.hostfile(),
            "a1 slots=1\na2 slots=1\nb1 slots=1\nb2 slots=1\n"
        );
        assert_eq!(
            p.namespaces()[..2],
            [SWITCH_NS.to_string(), HEAD_NS.to_string()]
        );
    }

    #[test]
    fn an_uplink_as_fast_as_its_children_is_not_shaped() {
        let mut m = sites();
        m[1].bandwidth = Some(100.0);
        let p = Plan::new("m.xml", &m).unwrap();
        assert_eq!(p.bridges[1].uplink.as_ref().unwrap().3, None);
        assert_eq!(p.bridges[2].uplink.as_ref().unwrap().3, Some(10.0));
    }

    #[test]
    fn commands_shape_both_ends_of_each_link() {
        let p = Plan::new("sites.xml", &sites()).unwrap();
        let cmds: Vec<String> = p.commands().iter().map(|c| c.join(" ")).collect();
        let has = |s: &str| assert!(cmds.iter().any(|c| c == s), "{s} not in {cmds:#?}");
        has("ip -n drumvc--sw link add dvcb1 type bridge");
        has("ip -n drumvc--sw link add dvcn3 type veth peer name eth0 netns drumvc-a1");
        has("ip -n drumvc--sw link set dvcn3 master dvcb1");
        has("ip -n drumvc-a1 addr add 10.213.0.2/16 dev eth0");
        // 100 Mbit/s: 100000 kbit, a bucket of 10 ms = 125000 bytes.
        has(
            "tc -n drumvc--sw qdisc replace dev dvcn3 root tbf rate 100000kbit burst 125000 latency 50ms",
        );
        has(
            "tc -n drumvc-a1 qdisc replace dev eth0 root tbf rate 100000kbit burst 125000 latency 50ms",
        );
        // The slow uplink of site-a, both ends; 10 Mbit/s gets the 16 KiB floor.
        has(
            "tc -n drumvc--sw qdisc replace dev dvcu1 root tbf rate 10000kbit burst 16384 latency 50ms",
        );
        has(
            "tc -n drumvc--sw qdisc replace dev dvcd1 root tbf rate 10000kbit burst 16384 latency 50ms",
        );
        has("ip -n drumvc--sw link set dvcd1 master dvcb0");
        // The head is on the root bridge, unshaped.
        has("ip -n drumvc--sw link set dvch master dvcb0");
        has("ip -n drumvc--head addr add 10.213.0.1/16 dev eth0");
        assert!(!cmds.iter().any(|c| c.contains("dvch root tbf")));
        // Bridges come before the links that use them; every name fits IFNAMSIZ.
        let first_port = cmds.iter().position(|c| c.contains("master")).unwrap();
        let last_bridge = cmds
            .iter()
            .rposition(|c| c.ends_with("type bridge"))
            .unwrap();
        assert!(last_bridge < first_port);
        for c in p.commands() {
            for w in c.iter().filter(|w| w.starts_with("dvc")) {
                assert!(w.len() <= 15, "{w}");
            }
        }
    }

    #[test]
    fn bad_machines_are_refused_with_the_node() {
        let mut m = sites();
        m[3].name = "a1".into();
        let e = Plan::new("m.xml", &m).unwrap_err().to_string();
        assert!(
            e.contains("two hosts would be named \"a1\" (node 4)"),
            "{e}"
        );
        m[3].name = "bad name".into();
        let e = Plan::new("m.xml", &m).unwrap_err().to_string();
        assert!(e.contains("node 4 is named \"bad name\""), "{e}");
        m[3].name = String::new();
        assert!(Plan::new("m.xml", &m).is_err());
        m[3].name = HEAD_HOST.into();
        assert!(Plan::new("m.xml", &m).is_err());
        for ok in ["a", "node-1", "n1.example.org", "1a"] {
            assert!(valid_host(ok), "{ok}");
        }
        for bad in ["-a", "a-", ".a", "a b", "ä", &"x".repeat(64)] {
            assert!(!valid_host(bad), "{bad}");
        }
    }

    #[test]
    fn drum_check_json_is_read() {
        let json = r#"{"source":"m.xml","ranks":3,"nodes":[
            {"nodenum":0,"name":"sw","type":"NETWORK","parent":null,"bandwidth":100.0,"cpus":null,"ranks":[0,0],"mflops":null,"load":null},
            {"nodenum":7,"name":"smp","type":"MULTIPLE_COMPUTING","parent":0,"bandwidth":null,"cpus":[0,1],"ranks":[0,2],"mflops":1.0,"load":null},
            {"nodenum":8,"name":"sp","type":"SINGLE_COMPUTING","parent":0,"bandwidth":null,"cpus":null,"ranks":[2,3],"mflops":1.0,"load":null}]}"#;
        let nodes = parse_machine(json).unwrap();
        assert_eq!(nodes[1].cpus, Some(vec![0, 1]));
        assert!(!nodes[0].computing && nodes[1].computing);
        let p = Plan::new("m.xml", &nodes).unwrap();
        assert_eq!(p.hostfile(), "smp slots=2\nsp slots=1\n");
        assert_eq!(p.nodes[0].rate_mbit, Some(100.0));
        assert!(parse_machine("{}").is_err());
    }
}
