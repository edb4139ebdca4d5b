//! Two kinds of plot as SVG text: grouped bars, and lines or points over a numeric axis.

const W: f64 = 760.0;
const H: f64 = 400.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 190.0;
const TOP: f64 = 40.0;
const BOTTOM: f64 = 120.0;
const COLOURS: [&str; 8] = [
    "#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#9c755f",
];

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// A "nice" upper end for an axis from 0 (or `lo`) to `hi`, and its tick step.
fn nice(lo: f64, hi: f64) -> (f64, f64, f64) {
    let span = (hi - lo).max(1e-12);
    let raw = span / 5.0;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 2.5, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag);
    let lo = (lo / step).floor() * step;
    let hi = (hi / step).ceil() * step;
    (lo, hi, step)
}

fn frame(title: &str, ylabel: &str, y0: f64, y1: f64, step: f64) -> String {
    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{W}\" height=\"{H}\" font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"{W}\" height=\"{H}\" fill=\"white\"/>\n<text x=\"{}\" y=\"22\" text-anchor=\"middle\" font-size=\"14\">{}</text>\n",
        W / 2.0,
        esc(title)
    );
    let ph = H - TOP - BOTTOM;
    let mut v = y0;
    while v <= y1 + step * 1e-6 {
        let y = TOP + ph * (1.0 - (v - y0) / (y1 - y0));
        s += &format!(
            "<line x1=\"{LEFT}\" x2=\"{}\" y1=\"{y:.1}\" y2=\"{y:.1}\" stroke=\"#ddd\"/><text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>\n",
            W - RIGHT,
            LEFT - 6.0,
            y + 4.0,
            fmt_tick(v)
        );
        v += step;
    }
    s += &format!(
        "<text transform=\"translate(16,{}) rotate(-90)\" text-anchor=\"middle\">{}</text>\n",
        TOP + ph / 2.0,
        esc(ylabel)
    );
    s
}

fn fmt_tick(v: f64) -> String {
    let a = v.abs();
    if a == 0.0 {
        "0".into()
    } else if a >= 100.0 {
        format!("{v:.0}")
    } else if a >= 1.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

fn legend(names: &[String], dots: bool) -> String {
    let mut s = String::new();
    for (i, n) in names.iter().enumerate() {
        let y = TOP + 18.0 * i as f64;
        let x = W - RIGHT + 12.0;
        let c = COLOURS[i % COLOURS.len()];
        s += &if dots {
            format!(
                "<circle cx=\"{}\" cy=\"{}\" r=\"4\" fill=\"{c}\"/>",
                x + 6.0,
                y + 6.0
            )
        } else {
            format!("<rect x=\"{x}\" y=\"{y}\" width=\"12\" height=\"12\" fill=\"{c}\"/>")
        };
        s += &format!(
            "<text x=\"{}\" y=\"{}\">{}</text>\n",
            x + 18.0,
            y + 10.0,
            esc(n)
        );
    }
    s
}

/// Grouped bars: one group per `groups` entry, one bar per series (`None`: no bar).
pub fn bars(
    title: &str,
    ylabel: &str,
    groups: &[String],
    series: &[(String, Vec<Option<f64>>)],
) -> String {
    let vals = series.iter().flat_map(|s| s.1.iter().flatten().copied());
    let lo = vals.clone().fold(0.0, f64::min);
    let hi = vals.fold(0.0, f64::max);
    let (y0, y1, step) = nice(lo, if hi > lo { hi } else { lo + 1.0 });
    let mut s = frame(title, ylabel, y0, y1, step);
    let pw = W - LEFT - RIGHT;
    let ph = H - TOP - BOTTOM;
    let gw = pw / groups.len().max(1) as f64;
    let bw = (gw * 0.8) / series.len().max(1) as f64;
    let y = |v: f64| TOP + ph * (1.0 - (v - y0) / (y1 - y0));
    for (g, name) in groups.iter().enumerate() {
        let gx = LEFT + gw * g as f64 + gw * 0.1;
        for (k, (_, vals)) in series.iter().enumerate() {
            if let Some(Some(v)) = vals.get(g) {
                let (a, b) = (y(*v), y(0.0f64.max(y0)));
                s += &format!(
                    "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"{}\"><title>{}: {v:.4}</title></rect>\n",
                    gx + bw * k as f64,
                    a.min(b),
                    bw.max(1.0),
                    (a - b).abs(),
                    COLOURS[k % COLOURS.len()],
                    esc(name)
                );
            }
        }
        s += &format!(
            "<text transform=\"translate({:.1},{}) rotate(30)\" font-size=\"10\"><title>{}</title>{}</text>\n",
            gx + gw * 0.3,
            H - BOTTOM + 14.0,
            esc(name),
            esc(&short(name))
        );
    }
    s += &legend(
        &series.iter().map(|s| s.0.clone()).collect::<Vec<_>>(),
        false,
    );
    s + "</svg>\n"
}

/// Series of (x, y) pairs, each drawn as points joined by a line, or points only where
/// `dots[k]` (missing: points only).
pub fn lines(
    title: &str,
    xlabel: &str,
    ylabel: &str,
    series: &[(String, Vec<(f64, f64)>)],
    dots: &[bool],
) -> String {
    let pts = series.iter().flat_map(|s| s.1.iter().copied());
    let (xl, xh) = pts
        .clone()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), p| {
            (a.min(p.0), b.max(p.0))
        });
    let (yl, yh) = pts.fold((0.0f64, f64::NEG_INFINITY), |(a, b), p| {
        (a.min(p.1), b.max(p.1))
    });
    let (xl, xh) = if xl.is_finite() && xh > xl {
        (xl, xh)
    } else {
        (0.0, 1.0)
    };
    let (y0, y1, step) = nice(yl, if yh > yl { yh } else { yl + 1.0 });
    let (x0, x1, xstep) = nice(xl, xh);
    let mut s = frame(title, ylabel, y0, y1, step);
    let pw = W - LEFT - RIGHT;
    let ph = H - TOP - BOTTOM;
    let px = |x: f64| LEFT + pw * (x - x0) / (x1 - x0);
    let py = |y: f64| TOP + ph * (1.0 - (y - y0) / (y1 - y0));
    let mut x = x0;
    while x <= x1 + xstep * 1e-6 {
        s += &format!(
            "<text x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n",
            px(x),
            H - BOTTOM + 16.0,
            fmt_tick(x)
        );
        x += xstep;
    }
    s += &format!(
        "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n",
        LEFT + pw / 2.0,
        H - BOTTOM + 36.0,
        esc(xlabel)
    );
    for (k, (name, p)) in series.iter().enumerate() {
        let c = COLOURS[k % COLOURS.len()];
        if !dots.get(k).copied().unwrap_or(true) && p.len() > 1 {
            let path: Vec<String> = p
                .iter()
                .map(|&(x, y)| format!("{:.1},{:.1}", px(x), py(y)))
                .collect();
            s += &format!(
                "<polyline points=\"{}\" fill=\"none\" stroke=\"{c}\" stroke-width=\"2\"/>\n",
                path.join(" ")
            );
        }
        for &(x, y) in p {
            s += &format!(
                "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"4\" fill=\"{c}\"><title>{}: ({x:.3}, {y:.4})</title></circle>\n",
                px(x),
                py(y),
                esc(name)
            );
        }
    }
    s += &legend(
        &series.iter().map(|s| s.0.clone()).collect::<Vec<_>>(),
        true,
    );
    s + "</svg>\n"
}

/// A group label short enough to fit under its bars, its "(…)" ending kept (the whole name
/// is its tooltip).
fn short(name: &str) -> String {
    const MAX: usize = 34;
    if name.chars().count() <= MAX {
        return name.into();
    }
    let (head, tail) = match name.rfind(" (") {
        Some(i) if name.ends_with(')') => name.split_at(i),
        _ => (name, ""),
    };
    let keep = MAX.saturating_sub(tail.chars().count() + 1).max(8);
    head.chars().take(keep).collect::<String>() + "…" + tail
}
