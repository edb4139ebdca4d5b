//! The study's plot: one panel per graph, imbalance against iterations, both axes
//! logarithmic (HBM ends in a few levels, implicit diffusion with a small time step takes
//! thousands of steps).

use std::fmt::Write as _;

/// One method's imbalance before iteration 1 (`points[0]`) and after each iteration.
pub struct Line {
    pub name: String,
    pub points: Vec<f64>,
}

/// One graph.
pub struct Panel {
    pub title: String,
    pub lines: Vec<Line>,
}

const PANEL_W: f64 = 360.0;
const PANEL_H: f64 = 300.0;
const MARGIN_L: f64 = 60.0;
const MARGIN_T: f64 = 60.0;
const MARGIN_B: f64 = 50.0;
const LEGEND_H: f64 = 22.0;
const COLOURS: [&str; 8] = [
    "#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#b07aa1", "#9c755f", "#edc948",
];
/// Imbalances below this are drawn at it (the bottom of the y axis).
const Y_FLOOR: f64 = 1e-6;

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// The SVG text of `panels` side by side under `title`, a shared legend below.
pub fn svg(title: &str, panels: &[Panel]) -> String {
    let max_iter = panels
        .iter()
        .flat_map(|p| &p.lines)
        .map(|l| l.points.len().saturating_sub(1))
        .max()
        .unwrap_or(1)
        .max(10);
    let x_decades = (max_iter as f64).log10().ceil() as i32;
    let y_top = panels
        .iter()
        .flat_map(|p| &p.lines)
        .flat_map(|l| &l.points)
        .fold(1.0f64, |m, &v| m.max(v))
        .log10()
        .ceil() as i32;
    let y_bottom = Y_FLOOR.log10() as i32;
    let names: Vec<&str> = panels
        .first()
        .map(|p| p.lines.iter().map(|l| l.name.as_str()).collect())
        .unwrap_or_default();
    let width = MARGIN_L + panels.len() as f64 * (PANEL_W + MARGIN_L);
    let height = MARGIN_T + PANEL_H + MARGIN_B + LEGEND_H * names.len().div_ceil(3) as f64;
    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{height}\" \
         font-family=\"sans-serif\" font-size=\"11\">\n<rect width=\"{width}\" \
         height=\"{height}\" fill=\"white\"/>\n<text x=\"{}\" y=\"22\" text-anchor=\"middle\" \
         font-size=\"14\">{}</text>\n",
        width / 2.0,
        esc(title)
    );
    for (k, panel) in panels.iter().enumerate() {
        let x0 = MARGIN_L + k as f64 * (PANEL_W + MARGIN_L);
        let axes = Axes {
            x0,
            x_decades,
            y_top,
            y_bottom,
        };
        axes.draw(&mut s, &panel.title);
        for (i, line) in panel.lines.iter().enumerate() {
            axes.line(&mut s, line, COLOURS[i % COLOURS.len()]);
        }
    }
    for (i, name) in names.iter().enumerate() {
        let x = MARGIN_L + (i % 3) as f64 * 300.0;
        let y = MARGIN_T + PANEL_H + MARGIN_B + LEGEND_H * (i / 3) as f64;
        let c = COLOURS[i % COLOURS.len()];
        let _ = writeln!(
            s,
            "<line x1=\"{x}\" x2=\"{}\" y1=\"{y}\" y2=\"{y}\" stroke=\"{c}\" stroke-width=\"2\"/>\
             <text x=\"{}\" y=\"{}\">{}</text>",
            x + 24.0,
            x + 30.0,
            y + 4.0,
            esc(name)
        );
    }
    s.push_str("</svg>\n");
    s
}

/// One panel's log-log axes: iterations 1 .. 10^x_decades, imbalance 10^y_bottom .. 10^y_top.
struct Axes {
    x0: f64,
    x_decades: i32,
    y_top: i32,
    y_bottom: i32,
}

impl Axes {
    fn x(&self, iter: f64) -> f64 {
        self.x0 + PANEL_W * iter.max(1.0).log10() / f64::from(self.x_decades)
    }

    fn y(&self, v: f64) -> f64 {
        let span = f64::from(self.y_top - self.y_bottom);
        MARGIN_T + PANEL_H * (f64::from(self.y_top) - v.max(Y_FLOOR).log10()) / span
    }

    fn draw(&self, s: &mut String, title: &str) {
        let (l, r) = (self.x0, self.x0 + PANEL_W);
        let (t, b) = (MARGIN_T, MARGIN_T + PANEL_H);
        let _ = writeln!(
            s,
            "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" font-size=\"12\">{}</text>\n\
             <rect x=\"{l}\" y=\"{t}\" width=\"{PANEL_W}\" height=\"{PANEL_H}\" fill=\"none\" \
             stroke=\"#888\"/>",
            (l + r) / 2.0,
            t - 8.0,
            esc(title)
        );
        for e in self.y_bottom..=self.y_top {
            let y = self.y(10f64.powi(e));
            let _ = writeln!(
                s,
                "<line x1=\"{l}\" x2=\"{r}\" y1=\"{y:.1}\" y2=\"{y:.1}\" stroke=\"#eee\"/>\
                 <text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">1e{e}</text>",
                l - 4.0,
                y + 4.0
            );
        }
        for e in 0..=self.x_decades {
            let x = self.x(10f64.powi(e));
            let _ = writeln!(
                s,
                "<line x1=\"{x:.1}\" x2=\"{x:.1}\" y1=\"{t}\" y2=\"{b}\" stroke=\"#eee\"/>\
                 <text x=\"{x:.1}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
                b + 14.0,
                10u64.pow(e as u32)
            );
        }
        let _ = writeln!(
            s,
            "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">iterations</text>\n\
             <text transform=\"translate({},{}) rotate(-90)\" text-anchor=\"middle\">\
             U_max / U* − 1</text>",
            (l + r) / 2.0,
            b + 32.0,
            l - 44.0,
            (t + b) / 2.0
        );
    }

    /// The line through the imbalance after iterations 1, 2, …; the start (iteration 0) is
    /// drawn at iteration 1's position as a dot.
    fn line(&self, s: &mut String, line: &Line, colour: &str) {
        let Some(&start) = line.points.first() else {
            return;
        };
        // One point per half pixel along x (a log axis crowds thousands of steps at its end).
        let mut pts: Vec<String> = Vec::new();
        let mut last_x = f64::NEG_INFINITY;
        for (i, &v) in line.points.iter().enumerate().skip(1) {
            let x = self.x(i as f64);
            if x - last_x >= 0.5 || i + 1 == line.points.len() {
                pts.push(format!("{x:.1},{:.1}", self.y(v)));
                last_x = x;
            }
        }
        let _ = writeln!(
            s,
            "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"2.5\" fill=\"{colour}\"/>\n\
             <polyline fill=\"none\" stroke=\"{colour}\" stroke-width=\"1.5\" points=\"{}\">\
             <title>{}</title></polyline>",
            self.x(1.0),
            self.y(start),
            pts.join(" "),
            esc(&line.name)
        );
    }
}
