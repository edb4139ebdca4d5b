//! `--plot`: an SVG of a run over ranks, step by step: each rank's part size (the target of
//! the rebalance and what it got) above, each rank's busy time (wall minus time in
//! collectives) and the step's wall time below, on a log scale.

use anyhow::Result;
use fem_laplace::dist::DistStepReport;
use std::fmt::Write as _;
use std::path::Path;

const COLOURS: [&str; 8] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
];

const W: f64 = 760.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 150.0;
const PANEL: f64 = 220.0;

struct Panel {
    top: f64,
    steps: (f64, f64),
    y: (f64, f64),
    log: bool,
}

impl Panel {
    fn x(&self, step: f64) -> f64 {
        let (a, b) = self.steps;
        LEFT + (step - a) / (b - a).max(1.0) * (W - LEFT - RIGHT)
    }
    fn y(&self, v: f64) -> f64 {
        let (lo, hi) = self.y;
        let t = if self.log {
            (v.max(lo).ln() - lo.ln()) / (hi.ln() - lo.ln())
        } else {
            (v - lo) / (hi - lo)
        };
        self.top + PANEL - t.clamp(0.0, 1.0) * PANEL
    }
    fn frame(&self, svg: &mut String, title: &str, ticks: &[(f64, String)], steps: &[usize]) {
        let _ = writeln!(
            svg,
            r##"<rect x="{LEFT}" y="{}" width="{}" height="{PANEL}" fill="none" stroke="#444"/>"##,
            self.top,
            W - LEFT - RIGHT
        );
        let _ = writeln!(
            svg,
            r#"<text x="{LEFT}" y="{}" font-size="13">{title}</text>"#,
            self.top - 8.0
        );
        for (v, label) in ticks {
            let y = self.y(*v);
            let _ = writeln!(
                svg,
                r##"<line x1="{LEFT}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#ddd"/><text x="{:.1}" y="{:.1}" font-size="11" text-anchor="end">{label}</text>"##,
                W - RIGHT,
                LEFT - 5.0,
                y + 4.0
            );
        }
        for &s in steps {
            let x = self.x(s as f64);
            let _ = writeln!(
                svg,
                r#"<text x="{x:.1}" y="{:.1}" font-size="11" text-anchor="middle">{s}</text>"#,
                self.top + PANEL + 14.0
            );
        }
    }
    fn line(&self, svg: &mut String, pts: &[(f64, f64)], colour: &str, dash: bool) {
        if pts.is_empty() {
            return;
        }
        let d: Vec<String> = pts
            .iter()
            .map(|&(s, v)| format!("{:.1},{:.1}", self.x(s), self.y(v)))
            .collect();
        let _ = writeln!(
            svg,
            r#"<polyline points="{}" fill="none" stroke="{colour}" stroke-width="2"{}/>"#,
            d.join(" "),
            if dash {
                r#" stroke-dasharray="5,4""#
            } else {
                ""
            }
        );
    }
}

fn legend(svg: &mut String, y: f64, colour: &str, dash: bool, text: &str) {
    let x = W - RIGHT + 12.0;
    let _ = writeln!(
        svg,
        r#"<line x1="{x}" y1="{y}" x2="{}" y2="{y}" stroke="{colour}" stroke-width="2"{}/><text x="{}" y="{}" font-size="11">{text}</text>"#,
        x + 24.0,
        if dash {
            r#" stroke-dasharray="5,4""#
        } else {
            ""
        },
        x + 30.0,
        y + 4.0
    );
}

/// Writes the plot of `reports` (rank 0's) to `path`.
pub fn write(path: &Path, reports: &[DistStepReport], title: &str) -> Result<()> {
    let ranks = reports.first().map_or(0, |r| r.nranks);
    let steps: Vec<usize> = reports.iter().map(|r| r.base.step).collect();
    let span = (
        *steps.first().unwrap_or(&0) as f64,
        *steps.last().unwrap_or(&1) as f64,
    );
    let h = 2.0 * PANEL + 150.0;
    let mut svg = format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{h}" font-family="sans-serif">
<rect width="100%" height="100%" fill="white"/>
<text x="{LEFT}" y="22" font-size="15">{}</text>
"#,
        xml_escape(title)
    );
    // Part sizes.
    let max_size = reports
        .iter()
        .flat_map(|r| {
            r.balance
                .iter()
                .flat_map(|b| b.targets.iter().chain(&b.achieved).copied())
                .chain(
                    r.ranks
                        .iter()
                        .map(|x| x.work / r.ranks.iter().map(|y| y.work).sum::<f64>().max(1.0)),
                )
        })
        .fold(1.0 / ranks.max(1) as f64, f64::max);
    let top = Panel {
        top: 50.0,
        steps: span,
        y: (0.0, (max_size * 1.1).min(1.0)),
        log: false,
    };
    let ticks: Vec<(f64, String)> = (0..=5)
        .map(|i| {
            let v = top.y.1 * i as f64 / 5.0;
            (v, format!("{v:.2}"))
        })
        .collect();
    top.frame(
        &mut svg,
        "part size per rank (dashed: target of the rebalance, solid: held after it)",
        &ticks,
        &steps,
    );
    for r in 0..ranks {
        let c = COLOURS[r % COLOURS.len()];
        let target: Vec<(f64, f64)> = reports
            .iter()
            .filter_map(|s| {
                s.balance
                    .as_ref()
                    .map(|b| (s.base.step as f64, b.targets[r]))
            })
            .collect();
        let held: Vec<(f64, f64)> = reports
            .iter()
            .map(|s| {
                let total: f64 = s.ranks.iter().map(|x| x.work).sum();
                (s.base.step as f64, s.ranks[r].work / total.max(1.0))
            })
            .collect();
        top.line(&mut svg, &target, c, true);
        top.line(&mut svg, &held, c, false);
        legend(
            &mut svg,
            top.top + 10.0 + 18.0 * r as f64,
            c,
            false,
            &format!("rank {r}"),
        );
    }
    // Times.
    let times: Vec<f64> = reports
        .iter()
        .flat_map(|s| {
            std::iter::once(s.wall_s).chain(s.ranks.iter().map(|x| (s.wall_s - x.wait_s).max(0.0)))
        })
        .filter(|&t| t > 0.0)
        .collect();
    let hi = times.iter().copied().fold(1e-3, f64::max) * 1.5;
    let lo = (hi / 1e4).max(times.iter().copied().fold(hi, f64::min) / 1.5);
    let bottom = Panel {
        top: 50.0 + PANEL + 60.0,
        steps: span,
        y: (lo, hi),
        log: true,
    };
    let mut ticks = Vec::new();
    let mut t = 10f64.powi(lo.log10().floor() as i32);
    while t <= hi {
        if t >= lo {
            ticks.push((t, format_seconds(t)));
        }
        t *= 10.0;
    }
    bottom.frame(
        &mut svg,
        "seconds per step (log): step wall time (black), each rank busy (wall − waits)",
        &ticks,
        &steps,
    );
    let wall: Vec<(f64, f64)> = reports
        .iter()
        .map(|s| (s.base.step as f64, s.wall_s))
        .collect();
    bottom.line(&mut svg, &wall, "#000", false);
    legend(&mut svg, bottom.top + 10.0, "#000", false, "step wall");
    for r in 0..ranks {
        let c = COLOURS[r % COLOURS.len()];
        let busy: Vec<(f64, f64)> = reports
            .iter()
            .map(|s| (s.base.step as f64, (s.wall_s - s.ranks[r].wait_s).max(lo)))
            .collect();
        bottom.line(&mut svg, &busy, c, true);
        legend(
            &mut svg,
            bottom.top + 28.0 + 18.0 * r as f64,
            c,
            true,
            &format!("rank {r} busy"),
        );
    }
    let _ = writeln!(
        svg,
        r#"<text x="{:.1}" y="{:.1}" font-size="12" text-anchor="middle">step</text>"#,
        LEFT + (W - LEFT - RIGHT) / 2.0,
        h - 12.0
    );
    svg.push_str("</svg>\n");
    cli_support::write_output(path, svg)
}

fn format_seconds(t: f64) -> String {
    if t >= 1.0 {
        format!("{t:.0} s")
    } else if t >= 1e-3 {
        format!("{:.0} ms", t * 1e3)
    } else {
        format!("{:.0} µs", t * 1e6)
    }
}

fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}
