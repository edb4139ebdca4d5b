//! Human-readable views of a machine: a text tree (with powers, if given) and an SVG picture.

use crate::machine::{Machine, Node, NodeId, NodeKind};
use crate::power::Powers;
use std::fmt::Write;

fn kind_label(kind: NodeKind) -> String {
    match kind {
        NodeKind::Network => "NETWORK".into(),
        NodeKind::SingleComputing => "SINGLE_COMPUTING".into(),
        NodeKind::MultipleComputing { numprocs } => format!("MULTIPLE_COMPUTING x{numprocs}"),
    }
}

fn rank_span(r: std::ops::Range<usize>) -> String {
    match r.len() {
        0 => String::new(),
        1 => format!("rank {}", r.start),
        _ => format!("ranks {}-{}", r.start, r.end - 1),
    }
}

fn details(machine: &Machine, id: NodeId) -> String {
    let n = machine.node(id);
    let mut d = Vec::new();
    if let Some(b) = n.mflops {
        d.push(format!("{b} MFLOPS"));
    }
    if let Some(b) = n.bandwidth {
        d.push(format!("{b} Mbit/s"));
    }
    if let Some(c) = &n.cpus {
        d.push(format!("cpus {c}"));
    }
    if let Some(m) = n.memory {
        d.push(format!("{m} MB"));
    }
    if let Some(lb) = &n.lbmethod {
        let mut s = format!("lbmethod {}", lb.method);
        for p in &lb.params {
            let _ = write!(s, " {}={}", p.name, p.value);
        }
        d.push(s);
    }
    if n.kind.is_computing() {
        d.push(rank_span(n.rank_range()));
    }
    if let Some(l) = n.load {
        d.push(format!("load {l}"));
    }
    d.join(", ")
}

/// One line summarising the machine: node counts by kind and ranks.
pub fn summary(machine: &Machine) -> String {
    let (mut net, mut sp, mut smp) = (0, 0, 0);
    for n in machine.nodes() {
        match n.kind {
            NodeKind::Network => net += 1,
            NodeKind::SingleComputing => sp += 1,
            NodeKind::MultipleComputing { .. } => smp += 1,
        }
    }
    format!(
        "{}: {} nodes ({net} network, {sp} single-processor, {smp} SMP), {} ranks",
        machine.source(),
        machine.nodes().len(),
        machine.num_ranks()
    )
}

/// The tree as text, one node per line with box-drawing branches; with `powers`, each line also
/// shows the node's share of its parent and its fraction of the machine, and each computing node
/// its per-rank part sizes.
pub fn tree_text(machine: &Machine, powers: Option<&Powers>) -> String {
    let mut out = String::new();
    // prefix stack: for each depth, whether the ancestor at that depth was the last child.
    let mut last_at: Vec<bool> = Vec::new();
    for (id, depth) in machine.depth_first() {
        let n = machine.node(id);
        last_at.truncate(depth);
        let is_last = match machine.parent(id) {
            None => true,
            Some(p) => machine.children(p).last() == Some(&id),
        };
        let mut line = String::new();
        for (d, &l) in last_at.iter().enumerate() {
            if d == 0 {
                continue;
            }
            line.push_str(if l { "    " } else { "│   " });
        }
        if depth > 0 {
            line.push_str(if is_last { "└── " } else { "├── " });
        }
        last_at.push(is_last);
        let name = if n.name.is_empty() {
            String::new()
        } else {
            format!(" {:?}", n.name)
        };
        let _ = write!(line, "[{}] {}{}", n.nodenum, kind_label(n.kind), name);
        let det = details(machine, id);
        if !det.is_empty() {
            let _ = write!(line, "  ({det})");
        }
        if let Some(p) = powers {
            let np = p.nodes[id.0];
            let _ = write!(
                line,
                "  power {:.4} of parent, {:.2}% of all",
                np.share,
                100.0 * np.fraction
            );
            if n.kind.is_computing() {
                let sizes: Vec<f64> = n.rank_range().map(|r| p.parts[r]).collect();
                let equal = sizes.windows(2).all(|w| (w[0] - w[1]).abs() < 1e-15);
                if equal && sizes.len() > 1 {
                    let _ = write!(line, "; part {:.4} each", sizes[0]);
                } else if sizes.len() == 1 {
                    let _ = write!(line, "; part {:.4}", sizes[0]);
                } else {
                    let list: Vec<String> = sizes.iter().map(|s| format!("{s:.4}")).collect();
                    let _ = write!(line, "; parts {}", list.join(" "));
                }
            }
        }
        out.push_str(&line);
        out.push('\n');
    }
    out
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn truncate(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(max - 1).collect();
        t.push('…');
        t
    }
}

/// Box size, the horizontal slot of a leaf, the height of a level and the top margin of the
/// SVG picture.
const BOX_W: f64 = 176.0;
const BOX_H: f64 = 70.0;
const SLOT: f64 = 196.0;
const LEVEL: f64 = 150.0;
const TOP: f64 = 70.0;

/// Where [`svg`] puts each node: its centre's x (leaves in depth-first order, parents centred
/// over their children) and its depth, and how many leaves there are.
struct Layout {
    x: Vec<f64>,
    depth: Vec<usize>,
    leaves: f64,
}

impl Layout {
    fn new(machine: &Machine) -> Layout {
        let order = machine.depth_first();
        let mut x = vec![0.0; machine.nodes().len()];
        let mut leaves = 0.0;
        for &(id, _) in &order {
            if machine.children(id).is_empty() {
                x[id.0] = SLOT / 2.0 + 10.0 + leaves * SLOT;
                leaves += 1.0;
            }
        }
        for &(id, _) in order.iter().rev() {
            let kids = machine.children(id);
            if !kids.is_empty() {
                x[id.0] = kids.iter().map(|c| x[c.0]).sum::<f64>() / kids.len() as f64;
            }
        }
        let mut depth = vec![0; machine.nodes().len()];
        for &(id, d) in &order {
            depth[id.0] = d;
        }
        Layout { x, depth, leaves }
    }

    /// The centre of node `id`'s box.
    fn centre(&self, id: NodeId) -> (f64, f64) {
        (self.x[id.0], TOP + self.depth[id.0] as f64 * LEVEL)
    }
}

/// An SVG picture of the tree: one box per node (colour by kind) with its name, number, kind
/// and details; with `powers`, a bar under each box whose length is the node's fraction of the
/// machine, the share of the parent on each edge, and the part size of each rank under each
/// computing node. The title names the machine and the model.
pub fn svg(machine: &Machine, powers: Option<&Powers>) -> String {
    let layout = Layout::new(machine);
    let depth_max = layout.depth.iter().copied().max().unwrap_or(0);
    let max_ranks = machine
        .computing_nodes()
        .map(|n| n.processes())
        .max()
        .unwrap_or(0)
        .min(16);
    let width = (layout.leaves * SLOT + 20.0).max(520.0);
    let height = TOP + depth_max as f64 * LEVEL + BOX_H + 40.0 + 16.0 * max_ranks as f64 + 40.0;
    let mut s = String::new();
    svg_head(&mut s, machine, powers, (width, height));
    // Edges first.
    for n in machine.nodes() {
        if let Some(p) = n.parent() {
            svg_edge(&mut s, &layout, (p, n.id), powers);
        }
    }
    for n in machine.nodes() {
        svg_box(&mut s, machine, n, layout.centre(n.id));
        if let Some(pw) = powers {
            svg_power(&mut s, n, pw, layout.centre(n.id));
        }
    }
    s.push_str("</svg>\n");
    s
}

/// The SVG element of a `width` × `height` picture, its background, title and legend.
fn svg_head(
    s: &mut String,
    machine: &Machine,
    powers: Option<&Powers>,
    (width, height): (f64, f64),
) {
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0}" height="{height:.0}" viewBox="0 0 {width:.0} {height:.0}" font-family="DejaVu Sans, Helvetica, Arial, sans-serif" font-size="12">"#
    );
    let _ = writeln!(s, r##"<rect width="100%" height="100%" fill="#ffffff"/>"##);
    let title = match powers {
        Some(p) => format!(
            "{} — {} ranks — model {}{}",
            machine.source(),
            machine.num_ranks(),
            p.model.name(),
            if p.model.w_comm() > 0.0 {
                format!(", w_comm = {}", p.model.w_comm())
            } else {
                String::new()
            }
        ),
        None => format!("{} — {} ranks", machine.source(), machine.num_ranks()),
    };
    let _ = writeln!(
        s,
        r#"<text x="12" y="24" font-size="16" font-weight="bold">{}</text>"#,
        esc(&title)
    );
    let _ = writeln!(
        s,
        r##"<g font-size="11"><rect x="12" y="34" width="12" height="12" fill="#dbe7f5" stroke="#4a6d96"/><text x="28" y="44">network</text><rect x="92" y="34" width="12" height="12" fill="#dff2dc" stroke="#4f8a46"/><text x="108" y="44">single-processor</text><rect x="212" y="34" width="12" height="12" fill="#fbe7cf" stroke="#b2772c"/><text x="228" y="44">SMP</text>{}</g>"##,
        if powers.is_some() {
            r##"<rect x="270" y="38" width="30" height="6" fill="#c0392b"/><text x="306" y="44">fraction of the whole machine</text>"##
        } else {
            ""
        }
    );
}

/// The edge from `parent` down to `child`; with `powers`, labelled with the child's share.
fn svg_edge(
    s: &mut String,
    layout: &Layout,
    (parent, child): (NodeId, NodeId),
    powers: Option<&Powers>,
) {
    let (x1, y1) = layout.centre(parent);
    let y1 = y1 + BOX_H / 2.0 + if powers.is_some() { 12.0 } else { 0.0 };
    let (x2, y2) = layout.centre(child);
    let y2 = y2 - BOX_H / 2.0;
    let _ = writeln!(
        s,
        r##"<line x1="{x1:.1}" y1="{y1:.1}" x2="{x2:.1}" y2="{y2:.1}" stroke="#888" stroke-width="1.5"/>"##
    );
    if let Some(pw) = powers {
        let (mx, my) = (x1 + 0.7 * (x2 - x1), y1 + 0.7 * (y2 - y1));
        let _ = writeln!(
            s,
            r##"<text x="{mx:.1}" y="{my:.1}" text-anchor="middle" font-size="11" fill="#333" stroke="#fff" stroke-width="3" paint-order="stroke">{:.3}</text>"##,
            pw.nodes[child.0].share
        );
    }
}

/// Node `n`'s box centred at `(cx, cy)`: its name, number, kind, details and method.
fn svg_box(s: &mut String, machine: &Machine, n: &Node, (cx, cy): (f64, f64)) {
    let (fill, stroke) = match n.kind {
        NodeKind::Network => ("#dbe7f5", "#4a6d96"),
        NodeKind::SingleComputing => ("#dff2dc", "#4f8a46"),
        NodeKind::MultipleComputing { .. } => ("#fbe7cf", "#b2772c"),
    };
    let (bx, by) = (cx - BOX_W / 2.0, cy - BOX_H / 2.0);
    let _ = writeln!(
        s,
        r#"<rect x="{bx:.1}" y="{by:.1}" width="{BOX_W}" height="{BOX_H}" rx="8" fill="{fill}" stroke="{stroke}" stroke-width="1.5"/>"#
    );
    let name = if n.name.is_empty() {
        format!("node {}", n.nodenum)
    } else {
        n.name.clone()
    };
    let lines = [
        (truncate(&name, 24).to_string(), "bold"),
        (format!("#{} {}", n.nodenum, short_kind(n.kind)), "normal"),
        (truncate(&compact_details(machine, n.id), 30), "normal"),
        (
            n.lbmethod.as_ref().map_or(String::new(), |l| {
                truncate(&format!("lbm {}", l.method), 30)
            }),
            "normal",
        ),
    ];
    for (i, (text, weight)) in lines.iter().enumerate() {
        if text.is_empty() {
            continue;
        }
        let ty = by + 16.0 + 15.0 * i as f64;
        let _ = writeln!(
            s,
            r#"<text x="{cx:.1}" y="{ty:.1}" text-anchor="middle" font-weight="{weight}">{}</text>"#,
            esc(text)
        );
    }
}

/// Under node `n`'s box centred at `(cx, cy)`: the bar and percentage of its fraction of the
/// machine, and for a computing node the part size of each rank (16 lines at most).
fn svg_power(s: &mut String, n: &Node, pw: &Powers, (cx, cy): (f64, f64)) {
    let (bx, by) = (cx - BOX_W / 2.0, cy - BOX_H / 2.0);
    let np = pw.nodes[n.id.0];
    let bw = BOX_W * np.fraction.clamp(0.0, 1.0);
    let _ = writeln!(
        s,
        r##"<rect x="{bx:.1}" y="{:.1}" width="{BOX_W}" height="7" fill="#f2d7d5"/><rect x="{bx:.1}" y="{:.1}" width="{bw:.1}" height="7" fill="#c0392b"/>"##,
        by + BOX_H + 3.0,
        by + BOX_H + 3.0
    );
    let _ = writeln!(
        s,
        r#"<text x="{cx:.1}" y="{:.1}" text-anchor="middle" font-size="11">{:.2}% of all</text>"#,
        by + BOX_H + 22.0,
        100.0 * np.fraction
    );
    if !n.kind.is_computing() {
        return;
    }
    let ranks: Vec<usize> = n.rank_range().collect();
    for (i, &r) in ranks.iter().take(16).enumerate() {
        let ty = by + BOX_H + 38.0 + 14.0 * i as f64;
        let text = if i == 15 && ranks.len() > 16 {
            format!("… {} more ranks", ranks.len() - 15)
        } else {
            format!("rank {r}: {:.3}%", 100.0 * pw.parts[r])
        };
        let _ = writeln!(
            s,
            r##"<text x="{cx:.1}" y="{ty:.1}" text-anchor="middle" font-size="10" fill="#555">{}</text>"##,
            esc(&text)
        );
    }
}

fn short_kind(kind: NodeKind) -> String {
    match kind {
        NodeKind::Network => "network".into(),
        NodeKind::SingleComputing => "single processor".into(),
        NodeKind::MultipleComputing { numprocs } => format!("SMP, {numprocs} CPUs"),
    }
}

fn compact_details(machine: &Machine, id: NodeId) -> String {
    let n = machine.node(id);
    let mut d = Vec::new();
    if let Some(b) = n.mflops {
        d.push(format!("{b} MFLOPS"));
    }
    if let Some(b) = n.bandwidth {
        d.push(format!("{b} Mb/s"));
    }
    if let Some(c) = &n.cpus {
        d.push(format!("cpus {c}"));
    }
    if n.kind.is_computing() {
        d.push(
            rank_span(n.rank_range())
                .replace("ranks ", "r")
                .replace("rank ", "r"),
        );
    }
    if let Some(l) = n.load {
        d.push(format!("load {l}"));
    }
    d.join(" · ")
}
