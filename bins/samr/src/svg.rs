//! The box hierarchy as a picture: each patch filled with its rank's colour, each level's
//! boxes outlined (finer levels with thinner lines), the unit square at 600 × 600 pixels.

use samr_kernel::{BoxPartition, Domain};
use std::fmt::Write as _;

/// Distinct colours for ranks (cycled beyond twelve).
const PALETTE: [&str; 12] = [
    "#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7",
    "#9c755f", "#bab0ac", "#86bcb6", "#d37295",
];

/// The SVG of `layout` over `domain` with `ranks` ranks (a legend names them).
pub fn hierarchy(layout: &BoxPartition, domain: Domain, ranks: usize) -> String {
    let size = 600.0;
    let legend = 24.0 * ranks.div_ceil(6) as f64;
    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{size}\" height=\"{}\" font-family=\"sans-serif\" font-size=\"12\">\n",
        size + legend + 8.0
    );
    s += "<rect width=\"600\" height=\"600\" fill=\"white\" stroke=\"black\"/>\n";
    for p in &layout.patches {
        let side = domain.level_rect(p.b.level).len(0) as f64;
        let k = size / side;
        let r = &p.b.rect;
        // y grows upwards in the domain, downwards in the picture.
        let _ = writeln!(
            s,
            "<rect x=\"{:.2}\" y=\"{:.2}\" width=\"{:.2}\" height=\"{:.2}\" fill=\"{}\" fill-opacity=\"{:.2}\" stroke=\"black\" stroke-width=\"{:.2}\"><title>level {} rank {} {}x{}</title></rect>",
            r.lo[0] as f64 * k,
            size - r.hi[1] as f64 * k,
            r.len(0) as f64 * k,
            r.len(1) as f64 * k,
            PALETTE[p.rank as usize % PALETTE.len()],
            0.45 + 0.15 * f64::from(p.b.level.min(3)),
            1.5 / f64::from(1u32 << p.b.level),
            p.b.level,
            p.rank,
            r.len(0),
            r.len(1)
        );
    }
    for r in 0..ranks {
        let (x, y) = (
            8.0 + 98.0 * (r % 6) as f64,
            size + 8.0 + 24.0 * (r / 6) as f64,
        );
        let _ = writeln!(
            s,
            "<rect x=\"{x}\" y=\"{y}\" width=\"14\" height=\"14\" fill=\"{}\"/><text x=\"{}\" y=\"{}\">rank {r}</text>",
            PALETTE[r % PALETTE.len()],
            x + 18.0,
            y + 12.0
        );
    }
    s + "</svg>\n"
}
