//! Loading, validation and writing of DrumHead machine descriptions: every error case with its
//! exact `FILE:LINE:COL: message`, round trips, and a never-panic property.

use drum_model::{Machine, NodeId, NodeKind, PowerConfig, static_powers};
use proptest::prelude::*;

/// Loads `xml` as `t.xml` and checks the error line.
fn check_err(xml: &str, expected: &str) {
    match Machine::parse_str(xml, "t.xml") {
        Ok(_) => panic!("accepted, expected: {expected}\n{xml}"),
        Err(e) => assert_eq!(e.to_string(), expected, "\n{xml}"),
    }
}

const ROOT: &str = r#"<node type="NETWORK" nodenum="0" parent="-1"/>"#;

fn model(body: &str) -> String {
    format!("<machinemodel>\n{body}\n</machinemodel>\n")
}

#[test]
fn not_well_formed() {
    check_err(
        "<machinemodel>\n  <node type=\"NETWORK\" nodenum=\"0\" parent=\"-1\">\n</machinemodel>",
        "t.xml:3:1: not well-formed XML: ill-formed document: expected `</node>`, but `</machinemodel>` was found",
    );
    check_err(
        "<machinemodel>\n<node type=\"NETWORK\" nodenum=\"0\" parent=\"-1\"",
        "t.xml:2:1: not well-formed XML: syntax error: tag not closed: `>` not found before end of input",
    );
    check_err(
        "<machinemodel><node type=NETWORK/></machinemodel>",
        "t.xml:1:26: not well-formed XML: position 10: attribute value must be enclosed in `\"` or `'`",
    );
    check_err(
        "<machinemodel>\n  <node nodenum=\"0\" nodenum=\"1\"/></machinemodel>",
        "t.xml:2:21: not well-formed XML: position 17: duplicated attribute, previous declaration at position 5",
    );
    check_err(
        "<machinemodel>\n<node type=\"NETWORK\" nodenum=\"0\" parent=\"-1\">",
        "t.xml:2:46: not well-formed XML: unexpected end of file: <node> opened at t.xml:2:1 is not closed",
    );
    check_err(
        "<machinemodel><node name=\"a&bogus;b\"/></machinemodel>",
        "t.xml:1:21: not well-formed XML: in the value of `name`: at 2..7: unrecognized entity `bogus`",
    );
}

#[test]
fn empty_and_wrong_documents() {
    check_err(
        "",
        "t.xml:1:1: empty machine description (no <machinemodel> element)",
    );
    check_err(
        "  \n <!-- nothing --> \n",
        "t.xml:1:1: empty machine description (no <machinemodel> element)",
    );
    check_err(
        "<machine/>",
        "t.xml:1:1: the document element is <machine>, expected <machinemodel>",
    );
    check_err(
        "<machinemodel/>\n<machinemodel/>",
        "t.xml:2:1: a second document element <machinemodel> after </machinemodel>",
    );
    check_err(
        "<machinemodel/>",
        "t.xml:1:1: no root node (no node has parent=\"-1\")",
    );
    match Machine::from_bytes(b"<machinemodel>\n <node name=\"\xff\"/>", "t.xml") {
        Err(e) => assert_eq!(e.to_string(), "t.xml:2:14: the file is not valid UTF-8"),
        Ok(_) => panic!("accepted bad UTF-8"),
    }
}

#[test]
fn structure_errors() {
    check_err(
        &model(&format!("{ROOT}\n<router/>")),
        "t.xml:3:1: unknown element <router> inside <machinemodel>",
    );
    check_err(
        &model(
            "<node type=\"NETWORK\" nodenum=\"0\" parent=\"-1\"><lbmethod lbm=\"HSFC\"><x/></lbmethod></node>",
        ),
        "t.xml:2:67: unknown element <x> inside <lbmethod>",
    );
    // The garbled Fig. 4 of DRUM 2005: attributes printed as text.
    check_err(
        "<machinemodel><node>\ntype=\"NETWORK\" nodenum=\"0\" name=\"\" IP=\"\" isMonitorable=\"false\"\n</node></machinemodel>",
        "t.xml:2:1: unexpected text \"type=\\\"NETWORK\\\" nodenum=\\\"0\\\" name=\\\"\\\" IP=\\\"\\\"…\": attributes belong on the <node ...> tag (Fig. 4 of DRUM 2005 prints them garbled as text)",
    );
    check_err(
        &model(
            "<node type=\"NETWORK\" nodenum=\"0\" parent=\"-1\"><lbmethod lbm=\"A\"/><lbmethod lbm=\"B\"/></node>",
        ),
        "t.xml:2:65: a second <lbmethod> in the same node",
    );
    check_err(
        &model(
            "<node type=\"NETWORK\" nodenum=\"0\" parent=\"-1\"><lbmethod KEEP_CUTS=\"1\"/></node>",
        ),
        "t.xml:2:46: <lbmethod> lacks the required attribute `lbm`",
    );
    // Method names are part of the format: an unknown one is rejected where it stands.
    check_err(
        &model(
            "<node type=\"NETWORK\" nodenum=\"0\" name=\"sw\" parent=\"-1\"><lbmethod lbm=\"FOO\"/></node>",
        ),
        "t.xml:2:66: node 0 (\"sw\"): unknown lbmethod `FOO` (known: HSFC, RCB, RIB, DIFFUSION)",
    );
}

#[test]
fn attribute_errors() {
    check_err(
        &model("<node nodenum=\"0\" parent=\"-1\"/>"),
        "t.xml:2:1: <node> lacks the required attribute `type`",
    );
    check_err(
        &model("<node type=\"ROUTER\" nodenum=\"0\" parent=\"-1\"/>"),
        "t.xml:2:7: unknown node type \"ROUTER\" (expected NETWORK, SINGLE_COMPUTING or MULTIPLE_COMPUTING)",
    );
    check_err(
        &model("<node type=\"NETWORK\" parent=\"-1\"/>"),
        "t.xml:2:1: <node> lacks the required attribute `nodenum`",
    );
    check_err(
        &model("<node type=\"NETWORK\" nodenum=\"0\"/>"),
        "t.xml:2:1: <node> lacks the required attribute `parent`",
    );
    check_err(
        &model(&format!(
            "{ROOT}\n<node type=\"MULTIPLE_COMPUTING\" nodenum=\"1\" parent=\"0\"/>"
        )),
        "t.xml:3:1: <node> lacks the required attribute `numprocs`",
    );
    check_err(
        &model("<node type=\"NETWORK\" nodenum=\"zero\" parent=\"-1\"/>"),
        "t.xml:2:22: `nodenum` is \"zero\", expected a whole node number",
    );
    check_err(
        &model(&format!(
            "{ROOT}\n<node type=\"SINGLE_COMPUTING\" nodenum=\"1\" parent=\"0\" mflops=\"fast\"/>"
        )),
        "t.xml:3:54: `mflops` is \"fast\", expected a number",
    );
    check_err(
        &model(&format!(
            "{ROOT}\n<node type=\"SINGLE_COMPUTING\" nodenum=\"1\" parent=\"0\" mflops=\"0\"/>"
        )),
        "t.xml:3:54: `mflops` is \"0\", expected a number > 0",
    );
    check_err(
        &model(&format!(
            "{ROOT}\n<node type=\"SINGLE_COMPUTING\" nodenum=\"1\" parent=\"0\" bandwidth=\"-5\"/>"
        )),
        "t.xml:3:54: `bandwidth` is \"-5\", expected a number > 0",
    );
    check_err(
        &model(&format!(
            "{ROOT}\n<node type=\"SINGLE_COMPUTING\" nodenum=\"1\" parent=\"0\" mflops=\"NaN\"/>"
        )),
        "t.xml:3:54: `mflops` is \"NaN\", expected a finite number",
    );
    check_err(
        &model(&format!(
            "{ROOT}\n<node type=\"SINGLE_COMPUTING\" nodenum=\"1\" parent=\"0\" imgx=\"inf\"/>"
        )),
        "t.xml:3:54: `imgx` is \"inf\", expected a finite number",
    );
    check_err(
        &model(&format!(
            "{ROOT}\n<node type=\"MULTIPLE_COMPUTING\" nodenum=\"1\" parent=\"0\" numprocs=\"2.5\"/>"
        )),
        "t.xml:3:56: `numprocs` is \"2.5\", expected a whole number",
    );
    check_err(
        &model(&format!(
            "{ROOT}\n<node type=\"MULTIPLE_COMPUTING\" nodenum=\"1\" parent=\"0\" numprocs=\"-2\"/>"
        )),
        "t.xml:3:56: `numprocs` is \"-2\", expected a whole number >= 1",
    );
    check_err(
        &model(&format!(
            "{ROOT}\n<node type=\"SINGLE_COMPUTING\" nodenum=\"1\" parent=\"0\" ranks=\"0\"/>"
        )),
        "t.xml:3:54: `ranks` is \"0\", expected a whole number >= 1",
    );
    check_err(
        &model("<node type=\"NETWORK\" nodenum=\"0\" parent=\"-1\" isMonitorable=\"maybe\"/>"),
        "t.xml:2:46: `isMonitorable` is \"maybe\", expected true or false",
    );
    check_err(
        &model(&format!(
            "{ROOT}\n<node type=\"MULTIPLE_COMPUTING\" nodenum=\"1\" parent=\"0\" numprocs=\"2\" cpus=\"0-2\"/>"
        )),
        "t.xml:3:69: `cpus` lists 3 CPUs but numprocs is 2",
    );
    check_err(
        &model(&format!(
            "{ROOT}\n<node type=\"SINGLE_COMPUTING\" nodenum=\"1\" parent=\"0\" cpus=\"1,x\"/>"
        )),
        "t.xml:3:54: `cpus` is \"1,x\", expected a CPU list such as 0-1,3",
    );
    check_err(
        &model(&format!(
            "{ROOT}\n<node type=\"SINGLE_COMPUTING\" nodenum=\"1\" parent=\"0\" cpus=\"0-1\"/>"
        )),
        "t.xml:3:54: `cpus` is \"0-1\", expected one CPU on a SINGLE_COMPUTING node",
    );
    check_err(
        &model("<node type=\"NETWORK\" nodenum=\"0\" parent=\"-1\" mflops=\"5\"/>"),
        "t.xml:2:46: attribute `mflops` not allowed: a NETWORK node runs no process",
    );
    check_err(
        &model(&format!(
            "{ROOT}\n<node type=\"MULTIPLE_COMPUTING\" nodenum=\"1\" parent=\"0\" numprocs=\"4000000000\" ranks=\"1\"/>"
        )),
        "t.xml:3:56: `numprocs` is \"4000000000\", expected at most 65536 processors",
    );
    check_err(
        &model(&format!(
            "{ROOT}\n<node type=\"SINGLE_COMPUTING\" nodenum=\"1\" parent=\"0\" ranks=\"9000000\"/>"
        )),
        "t.xml:3:54: `ranks` is \"9000000\", expected at most 1048576 processes (the limit of a \
         machine)",
    );
    check_err(
        &model(&format!(
            "{ROOT}\n<node type=\"SINGLE_COMPUTING\" nodenum=\"1\" parent=\"0\" ranks=\"600000\"/>\n\
             <node type=\"SINGLE_COMPUTING\" nodenum=\"2\" parent=\"0\" ranks=\"600000\"/>"
        )),
        "t.xml:4:1: the machine declares more than 1048576 processes",
    );
}

#[test]
fn tree_errors() {
    check_err(
        &model(&format!(
            "{ROOT}\n<node type=\"SINGLE_COMPUTING\" nodenum=\"0\" parent=\"0\"/>"
        )),
        "t.xml:3:31: duplicate nodenum 0 (first used at t.xml:2:1)",
    );
    check_err(
        &model(&format!(
            "{ROOT}\n<node type=\"SINGLE_COMPUTING\" nodenum=\"5\" parent=\"9\"/>"
        )),
        "t.xml:3:43: node 5 names parent 9, which does not exist",
    );
    check_err(
        &model(
            "<node type=\"NETWORK\" nodenum=\"0\" parent=\"1\"/>\n<node type=\"NETWORK\" nodenum=\"1\" parent=\"0\"/>",
        ),
        "t.xml:2:1: no root node (no node has parent=\"-1\")",
    );
    check_err(
        &model(&format!(
            "{ROOT}\n<node type=\"NETWORK\" nodenum=\"1\" parent=\"-1\"/>"
        )),
        "t.xml:3:34: two root nodes: 0 and 1 both have parent=\"-1\" (or are top-level without a parent)",
    );
    check_err(
        &model(&format!(
            "{ROOT}\n<node type=\"SINGLE_COMPUTING\" nodenum=\"4\" parent=\"0\"/>\n\
             <node type=\"NETWORK\" nodenum=\"1\" parent=\"3\"/>\n\
             <node type=\"NETWORK\" nodenum=\"2\" parent=\"1\"/>\n\
             <node type=\"NETWORK\" nodenum=\"3\" parent=\"2\"/>"
        )),
        "t.xml:4:34: parent links form a cycle: 1 -> 3 -> 2 -> 1",
    );
    check_err(
        &model(&format!(
            "{ROOT}\n<node type=\"SINGLE_COMPUTING\" nodenum=\"1\" parent=\"0\"/>\n\
             <node type=\"SINGLE_COMPUTING\" nodenum=\"2\" parent=\"1\"/>"
        )),
        "t.xml:4:1: computing node 1 has a child (node 2); computing nodes must be leaves",
    );
    // The same in the nested form.
    check_err(
        &model(
            "<node type=\"NETWORK\" nodenum=\"0\" parent=\"-1\">\n\
             <node type=\"MULTIPLE_COMPUTING\" nodenum=\"1\" numprocs=\"2\">\n\
             <node type=\"SINGLE_COMPUTING\" nodenum=\"2\"/></node></node>",
        ),
        "t.xml:4:1: computing node 1 has a child (node 2); computing nodes must be leaves",
    );
    check_err(
        &model(&format!(
            "{ROOT}\n<node type=\"NETWORK\" nodenum=\"1\" parent=\"0\"/>"
        )),
        "t.xml:3:1: network node 1 has no children; every leaf must be a computing node",
    );
    check_err(
        &model(
            "<node type=\"NETWORK\" nodenum=\"0\" parent=\"-1\">\n\
             <node type=\"SINGLE_COMPUTING\" nodenum=\"1\" parent=\"7\"/></node>",
        ),
        "t.xml:3:43: node 1 says parent=\"7\" but is nested inside node 0",
    );
}

#[test]
fn never_panics_on_hostile_sizes() {
    // Deep nesting: iterative parser and tree walks, no recursion.
    let depth = 20_000;
    let mut xml = String::from("<machinemodel>");
    for i in 0..depth {
        xml.push_str(&format!(
            "<node type=\"NETWORK\" nodenum=\"{i}\"{}>",
            if i == 0 { " parent=\"-1\"" } else { "" }
        ));
    }
    xml.push_str(&format!(
        "<node type=\"SINGLE_COMPUTING\" nodenum=\"{depth}\"/>"
    ));
    for _ in 0..depth {
        xml.push_str("</node>");
    }
    xml.push_str("</machinemodel>");
    let m = Machine::parse_str(&xml, "deep.xml").unwrap();
    assert_eq!(m.num_ranks(), 1);
    let p = static_powers(&m, &PowerConfig::default()).unwrap();
    assert_eq!(p.parts, vec![1.0]);
    assert_eq!(m.depth_first().len(), depth + 1);
    assert_eq!(m.path_from_root(m.rank_node(0)).len(), depth + 1);
}

#[test]
fn hostile_files_and_figures_are_refused_or_scaled() {
    // An endless file is refused after the limit, without reading on.
    let e = Machine::from_file("/dev/zero").unwrap_err().to_string();
    assert_eq!(
        e,
        "/dev/zero: larger than the limit of 16777216 bytes for a machine file"
    );
    // A load over the per-rank limit, before anything could be forked.
    check_err(
        &model(&format!(
            "{ROOT}\n<node type=\"SINGLE_COMPUTING\" nodenum=\"1\" parent=\"0\" cpus=\"0\" load=\"65\"/>"
        )),
        "t.xml:3:63: `load` is \"65\", expected at most 64 competing processes (the limit per \
         rank)",
    );
    // Past 2^32 and past 2^64: the same limit, not "a whole number".
    for huge in ["99999999999", "99999999999999999999999"] {
        check_err(
            &model(&format!(
                "{ROOT}\n<node type=\"SINGLE_COMPUTING\" nodenum=\"1\" parent=\"0\" cpus=\"0\" load=\"{huge}\"/>"
            )),
            &format!(
                "t.xml:3:63: `load` is \"{huge}\", expected at most 64 competing processes (the \
                 limit per rank)"
            ),
        );
        check_err(
            &model(&format!(
                "{ROOT}\n<node type=\"MULTIPLE_COMPUTING\" nodenum=\"1\" parent=\"0\" numprocs=\"{huge}\"/>"
            )),
            &format!("t.xml:3:56: `numprocs` is \"{huge}\", expected at most 65536 processors"),
        );
    }
    // Ratings whose sum overflows share as their ratios say.
    let m = Machine::parse_str(
        &model(&format!(
            "{ROOT}\n<node type=\"SINGLE_COMPUTING\" nodenum=\"1\" parent=\"0\" mflops=\"1e308\"/>\n\
             <node type=\"SINGLE_COMPUTING\" nodenum=\"2\" parent=\"0\" mflops=\"1e308\"/>"
        )),
        "t.xml",
    )
    .unwrap();
    let p = static_powers(&m, &PowerConfig::default()).unwrap();
    assert_eq!(p.parts, vec![0.5, 0.5]);
}

const FLAT: &str = r#"<?xml version="1.0"?>
<machinemodel version="2" author="x">
  <node type="NETWORK" nodenum="0" name="" IP="" isMonitorable="false" parent="-1" imgx="361.0" imgy="52.0" vendor="acme">
    <lbmethod lbm="HSFC" KEEP_CUTS="1" IMBALANCE_TOL="1.1"></lbmethod>
  </node>
  <node type="SINGLE_COMPUTING" nodenum="2" name="mendoza.cs.williams.edu" IP="137.165.8.140" isMonitorable="true" parent="0" imgx="50.0" imgy="138.0" mflops="45" serial="A&amp;B"/>
  <node type="MULTIPLE_COMPUTING" nodenum="3" name="rivera.cs.williams.edu" IP="137.165.8.130" isMonitorable="false" parent="0" imgx="74.64 " imgy="263.0" numprocs="4" cpus="0-3" ranks="2" bandwidth="100">
    <lbmethod lbm="HSFC" KEEP_CUTS="1">
    </lbmethod></node>
</machinemodel>
"#;

const NESTED: &str = r#"<machinemodel version="2" author="x">
  <node type="NETWORK" nodenum="0" name="" IP="" isMonitorable="false" parent="-1" imgx="361" imgy="52" vendor="acme">
    <lbmethod lbm="HSFC" KEEP_CUTS="1" IMBALANCE_TOL="1.1"/>
    <node type="SINGLE_COMPUTING" nodenum="2" name="mendoza.cs.williams.edu" IP="137.165.8.140" isMonitorable="true" imgx="50.0" imgy="138.0" mflops="45" serial="A&amp;B"/>
    <node type="MULTIPLE_COMPUTING" nodenum="3" name="rivera.cs.williams.edu" IP="137.165.8.130" isMonitorable="false" imgx="74.64" imgy="263.0" numprocs="4" cpus="3,0-2" ranks="2" bandwidth="100">
      <lbmethod lbm="HSFC" KEEP_CUTS="1"/>
    </node>
  </node>
</machinemodel>"#;

#[test]
fn fig4_excerpt_loads_with_its_api() {
    let m = Machine::parse_str(FLAT, "fig4.xml").unwrap();
    assert_eq!(m.nodes().len(), 3);
    let root = m.node(m.root());
    assert_eq!(root.kind, NodeKind::Network);
    let lb = root.lbmethod.as_ref().unwrap();
    assert_eq!(lb.method, drum_model::PartitionMethod::Hsfc);
    assert_eq!(lb.param("KEEP_CUTS"), Some("1"));
    assert_eq!(lb.params[1].name, "IMBALANCE_TOL");
    assert_eq!(lb.method_location.to_string(), "fig4.xml:4:15");
    assert_eq!(m.children(m.root()), &[NodeId(1), NodeId(2)]);
    let rivera = m.node(m.find(3).unwrap());
    assert_eq!(rivera.kind, NodeKind::MultipleComputing { numprocs: 4 });
    assert_eq!(rivera.processes(), 2);
    assert_eq!(rivera.img, (Some(74.64), Some(263.0)));
    assert_eq!(rivera.cpus.as_ref().unwrap().cpus(), &[0, 1, 2, 3]);
    assert_eq!(rivera.rank_range(), 1..3);
    assert_eq!(m.num_ranks(), 3);
    assert_eq!(
        (0..3)
            .map(|r| m.node(m.rank_node(r)).nodenum)
            .collect::<Vec<_>>(),
        vec![2, 3, 3]
    );
    assert_eq!(m.subtree_ranks(m.root()), vec![0, 1, 2]);
    assert_eq!(m.link_bandwidth(NodeId(1)), None);
    assert_eq!(m.node(NodeId(1)).extra[0].name, "serial");
    assert_eq!(m.node(NodeId(1)).extra[0].value, "A&B");
}

#[test]
fn round_trip_keeps_everything() {
    let a = Machine::parse_str(FLAT, "flat.xml").unwrap();
    let b = Machine::parse_str(NESTED, "nested.xml").unwrap();
    assert!(a.same_model(&b), "{}\n---\n{}", a.to_xml(), b.to_xml());
    let text = a.to_xml();
    assert!(text.contains("vendor=\"acme\"") && text.contains("serial=\"A&amp;B\""));
    assert!(text.contains("<machinemodel version=\"2\" author=\"x\">"));
    let c = Machine::parse_str(&text, "again.xml").unwrap();
    assert_eq!(c.to_xml(), text);
    for (x, y) in a.nodes().iter().zip(c.nodes()) {
        assert_eq!(
            (x.nodenum, x.kind, &x.name, &x.ip, x.is_monitorable),
            (y.nodenum, y.kind, &y.name, &y.ip, y.is_monitorable)
        );
        assert_eq!(
            (x.img, x.mflops, x.bandwidth, &x.cpus, x.ranks),
            (y.img, y.mflops, y.bandwidth, &y.cpus, y.ranks)
        );
        assert_eq!(x.parent(), y.parent());
        let names = |v: &[drum_model::Attribute]| {
            v.iter()
                .map(|a| (a.name.clone(), a.value.clone()))
                .collect::<Vec<_>>()
        };
        assert_eq!(names(&x.extra), names(&y.extra));
        assert_eq!(
            x.lbmethod.as_ref().map(|l| (l.method, names(&l.params))),
            y.lbmethod.as_ref().map(|l| (l.method, names(&l.params)))
        );
    }
}

#[test]
fn every_machine_file_round_trips() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../machines");
    let mut n = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "xml") {
            let m = Machine::from_file(&path).unwrap();
            let again = Machine::parse_str(&m.to_xml(), "again").unwrap();
            assert!(m.same_model(&again), "{}", path.display());
            n += 1;
        }
    }
    assert!(n >= 3);
}

fn machine_files() -> Vec<String> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../machines");
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "xml"))
        .map(|p| std::fs::read_to_string(p).unwrap())
        .collect();
    v.push(FLAT.to_string());
    v.push(NESTED.to_string());
    v
}

/// A random valid machine in the flat form, nodes in a random document order.
fn arb_machine() -> impl Strategy<Value = String> {
    (1usize..12, any::<u64>()).prop_map(|(n, seed)| {
        let mut s = seed | 1;
        let mut next = move |m: u64| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s % m
        };
        // Node 0 is the root network; nodes 1..=n are attached to an earlier network node.
        let mut kinds = vec![0u8]; // 0 network, 1 single, 2 multiple
        let mut parents = vec![-1i64];
        for i in 1..=n {
            let nets: Vec<usize> = (0..i).filter(|&j| kinds[j] == 0).collect();
            parents.push(nets[next(nets.len() as u64) as usize] as i64);
            kinds.push(next(3) as u8);
        }
        // Network leaves get a computing child so the machine is valid.
        let len = kinds.len();
        for j in 0..len {
            if kinds[j] == 0 && !parents.contains(&(j as i64)) {
                kinds.push(1);
                parents.push(j as i64);
            }
        }
        let mut order: Vec<usize> = (0..kinds.len()).collect();
        for i in (1..order.len()).rev() {
            order.swap(i, next(i as u64 + 1) as usize);
        }
        let mut xml = String::from("<machinemodel>\n");
        for &i in &order {
            let ty = ["NETWORK", "SINGLE_COMPUTING", "MULTIPLE_COMPUTING"][kinds[i] as usize];
            xml.push_str(&format!(
                "<node type=\"{ty}\" nodenum=\"{}\" parent=\"{}\" name=\"n{i}\" x{i}=\"{}\"",
                i * 3,
                if parents[i] < 0 { -1 } else { parents[i] * 3 },
                next(100)
            ));
            match kinds[i] {
                1 => xml.push_str(&format!(" mflops=\"{}\"", 1 + next(1000))),
                2 => xml.push_str(&format!(
                    " numprocs=\"{}\" mflops=\"{}.5\" ranks=\"{}\"",
                    1 + next(8),
                    1 + next(1000),
                    1 + next(4)
                )),
                _ => xml.push_str(&format!(" bandwidth=\"{}\"", 10 + next(1000))),
            }
            if next(3) == 0 {
                xml.push_str(&format!(
                    "><lbmethod lbm=\"RCB\" P{i}=\"{}\"/></node>\n",
                    next(9)
                ));
            } else {
                xml.push_str("/>\n");
            }
        }
        xml.push_str("</machinemodel>\n");
        xml
    })
}

proptest! {
    // PROPTEST_CASES=100000 for a deeper local run.
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(256),
        ..ProptestConfig::default()
    })]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
        let _ = Machine::from_bytes(&bytes, "fuzz.xml");
    }

    #[test]
    fn mutated_machine_files_never_panic(
        pick in any::<prop::sample::Index>(),
        edits in proptest::collection::vec((any::<prop::sample::Index>(), 0u8..4, any::<u8>()), 1..8),
    ) {
        let files = machine_files();
        let mut bytes = files[pick.index(files.len())].clone().into_bytes();
        const TOKENS: &[&[u8]] = &[b"<", b">", b"\"", b"/>", b"</node>", b"<node ", b"-1", b"NaN", b"=", b"&", b"<!--", b"\xc3"];
        for (at, op, val) in edits {
            if bytes.is_empty() { break; }
            let i = at.index(bytes.len());
            match op {
                0 => { bytes.remove(i); }
                1 => bytes[i] = val,
                2 => { let t = TOKENS[val as usize % TOKENS.len()]; bytes.splice(i..i, t.iter().copied()); }
                _ => bytes.truncate(i),
            }
        }
        if let Ok(m) = Machine::from_bytes(&bytes, "mutant.xml") {
            // Whatever loads must round-trip and have powers that sum to 1 (or a clear error).
            let again = Machine::parse_str(&m.to_xml(), "again").unwrap();
            prop_assert!(m.same_model(&again));
            if let Ok(p) = static_powers(&m, &PowerConfig::default()) {
                prop_assert!((p.parts.iter().sum::<f64>() - 1.0).abs() < 1e-9);
            }
        }
    }

    #[test]
    fn random_machines_round_trip_and_share_correctly(xml in arb_machine()) {
        let m = Machine::parse_str(&xml, "random.xml").unwrap();
        let again = Machine::parse_str(&m.to_xml(), "again").unwrap();
        prop_assert!(m.same_model(&again));
        let p = static_powers(&m, &PowerConfig::default()).unwrap();
        prop_assert!((p.parts.iter().sum::<f64>() - 1.0).abs() < 1e-9);
        for n in m.nodes() {
            let kids = m.children(n.id);
            if !kids.is_empty() {
                let s: f64 = p.targets(&m, n.id).iter().sum();
                prop_assert!((s - 1.0).abs() < 1e-9);
            }
            // Part size = product of shares along the path, times the rank's share.
            for r in n.rank_range() {
                let path: f64 = m.path_from_root(n.id).iter().map(|&a| p.share(a)).product();
                prop_assert!((p.parts[r] - path / n.processes() as f64).abs() < 1e-12);
            }
        }
        // Ranks follow document order of the computing nodes.
        let mut expect = Vec::new();
        for n in m.computing_nodes() {
            expect.extend(std::iter::repeat_n(n.id, n.processes()));
        }
        prop_assert_eq!((0..m.num_ranks()).map(|r| m.rank_node(r)).collect::<Vec<_>>(), expect);
    }
}
