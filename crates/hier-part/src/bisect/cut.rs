//! Cuts of a recursive bisection and the partition result that keeps them.

use std::fmt;
use std::ops::Range;

/// Which recursive bisection made a partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Method {
    /// Recursive coordinate bisection: cuts perpendicular to a coordinate axis.
    Rcb,
    /// Recursive inertial bisection: cuts perpendicular to the principal inertial axis.
    Rib,
}

impl fmt::Display for Method {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Method::Rcb => "RCB",
            Method::Rib => "RIB",
        })
    }
}

/// The hyperplane family of one cut: what a point is compared by.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Plane {
    /// RCB: the key of a point is its coordinate `x[axis]`.
    Axis(usize),
    /// RIB: the key of a point `x` is `Σ_j (x_j / scale − origin_j) · direction_j`, a signed
    /// distance along the principal inertial axis in units of `scale`. `scale` is a power of
    /// two (so `x_j / scale` is exact) and `origin · scale` is the weighted centroid of the
    /// objects that were cut. Components beyond the dimension are 0.
    Inertial {
        /// Weighted centroid divided by `scale`.
        origin: [f64; 3],
        /// Unit eigenvector of the largest eigenvalue of the weighted covariance; its
        /// largest component is positive.
        direction: [f64; 3],
        /// Power of two at least the largest coordinate magnitude of the objects cut.
        scale: f64,
    },
}

impl Plane {
    /// The key of point `x` (its first `dim` coordinates are used).
    #[inline]
    pub fn key(&self, x: &[f64]) -> f64 {
        match *self {
            Plane::Axis(axis) => x[axis],
            Plane::Inertial {
                origin,
                direction,
                scale,
            } => project(x, &origin, &direction, 1.0 / scale),
        }
    }
}

/// `Σ_j (x_j · inv_scale − origin_j) · direction_j` over the coordinates of `x`, in index order.
/// Partitioning and [`Bisection::point_assign`] both use this one function, so a point's key is
/// bit-identical in both.
#[inline(always)]
pub(crate) fn project(x: &[f64], origin: &[f64], direction: &[f64], inv_scale: f64) -> f64 {
    let mut s = 0.0;
    for j in 0..x.len() {
        s += (x[j] * inv_scale - origin[j]) * direction[j];
    }
    s
}

/// One cut of a recursive bisection: the objects of parts `low.start..high.end` were split into
/// those of parts `low` (key ≤ `value`) and of parts `high` (key > `value`).
///
/// When objects whose key equals `value` exactly were split between the sides (only without
/// `keep_ties`), `tie` holds the coordinates of the last low-side object on the cut: a point
/// with key == `value` is low iff its coordinates are lexicographically ≤ `tie`. An empty low
/// side has `value = −∞`, an empty high side `value = +∞`.
#[derive(Debug, Clone, PartialEq)]
pub struct Cut {
    /// The plane family.
    pub plane: Plane,
    /// Position of the cut along the key.
    pub value: f64,
    /// Tie-break point when objects on the cut were split (see above).
    pub tie: Option<[f64; 3]>,
    /// Parts on the low side.
    pub low: Range<u32>,
    /// Parts on the high side.
    pub high: Range<u32>,
    /// Index in [`Bisection::cuts`] of the cut that splits each side further (`None` when the
    /// side is a single part).
    pub children: [Option<usize>; 2],
    /// Number of cuts above this one (0 for the root).
    pub depth: u32,
    /// Weight that went to each side (from the exact integer weights).
    pub side_weights: [f64; 2],
    /// Number of objects that went to each side.
    pub side_counts: [usize; 2],
}

impl Cut {
    /// 0 if point `x` lies on the low side of the cut, 1 otherwise.
    #[inline]
    pub fn side(&self, x: &[f64]) -> usize {
        let key = self.plane.key(x);
        if key < self.value {
            return 0;
        }
        if key > self.value {
            return 1;
        }
        match &self.tie {
            None => 0,
            Some(t) => {
                for (a, b) in x.iter().zip(t) {
                    if a < b {
                        return 0;
                    }
                    if a > b {
                        return 1;
                    }
                }
                0
            }
        }
    }
}

/// The result of an RCB or RIB partition: per-part weights and targets, imbalance, and the
/// cut tree (for [`Bisection::point_assign`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Bisection {
    /// The method.
    pub method: Method,
    /// Dimension of the points.
    pub dim: usize,
    /// The cuts in preorder: `cuts[0]` is the root; empty when there is one part.
    pub cuts: Vec<Cut>,
    /// Weight `W_k` of each part (sum of the given weights, or object count).
    pub part_weights: Vec<f64>,
    /// Number of objects in each part.
    pub part_counts: Vec<usize>,
    /// Target weight `T_k = W · t_k / Σ t` of each part.
    pub targets: Vec<f64>,
    /// Total weight `W`.
    pub total_weight: f64,
    /// Largest object weight (1 for unit weights).
    pub max_object_weight: f64,
    /// Largest number of cuts above a part (`⌈log2 k⌉`).
    pub depth: u32,
    /// max_k W_k / T_k over parts with T_k > 0 (1 when W = 0).
    pub max_ratio: f64,
    /// max_k |W_k − T_k| / T_k over parts with T_k > 0.
    pub max_rel_dev: f64,
    /// max_k |W_k − T_k|.
    pub max_abs_dev: f64,
}

impl Bisection {
    /// Number of parts.
    pub fn k(&self) -> usize {
        self.part_weights.len()
    }

    /// The part a point at `x` belongs to, by walking the cuts (Zoltan's `Point_PP_Assign`).
    ///
    /// For every object of the partitioned set this returns its part, except for exact
    /// duplicates of a cut's `tie` point that were split between the sides. Points outside the
    /// partitioned set go where the cuts put them.
    ///
    /// # Panics
    /// If `x.len() != self.dim`.
    pub fn point_assign(&self, x: &[f64]) -> u32 {
        assert_eq!(
            x.len(),
            self.dim,
            "point_assign: point has the wrong dimension"
        );
        let Some(mut c) = self.cuts.first() else {
            return 0;
        };
        loop {
            let s = c.side(x);
            match c.children[s] {
                Some(i) => c = &self.cuts[i],
                None => return if s == 0 { c.low.start } else { c.high.start },
            }
        }
    }

    /// The balance guarantee `depth · w_max / 2`: every part has |W_k − T_k| at most this
    /// (plus rounding of order n·w_max·2⁻⁵²), unless `keep_ties` kept heavier groups of
    /// objects with equal keys together.
    pub fn balance_bound(&self) -> f64 {
        self.depth as f64 * self.max_object_weight / 2.0
    }
}

/// Imbalance figures of weights `w` against targets `t`: (max W/T, max |W−T|/T, max |W−T|).
pub(crate) fn imbalance(w: &[f64], t: &[f64]) -> (f64, f64, f64) {
    let total: f64 = w.iter().sum();
    let mut ratio: f64 = if total > 0.0 { 0.0 } else { 1.0 };
    let (mut rel, mut abs) = (0.0f64, 0.0f64);
    for (&wk, &tk) in w.iter().zip(t) {
        let d = (wk - tk).abs();
        abs = abs.max(d);
        if tk > 0.0 {
            ratio = ratio.max(wk / tk);
            rel = rel.max(d / tk);
        } else if wk > 0.0 {
            ratio = f64::INFINITY;
            rel = f64::INFINITY;
        }
    }
    (ratio, rel, abs)
}

const AXES: [&str; 3] = ["x", "y", "z"];

/// `(x_0, …)` with `dim` components.
fn vector(v: &[f64; 3], dim: usize) -> String {
    let parts: Vec<String> = v[..dim].iter().map(|x| format!("{x:.6}")).collect();
    format!("({})", parts.join(", "))
}

impl Cut {
    /// The cut as an inequality for the low side, e.g. `x <= 0.431250` or
    /// `(x/s - o).d <= 0.012345 with d = (0.7071, 0.7071), centroid (…), s = 1`.
    pub fn describe(&self, dim: usize) -> String {
        let lhs = match self.plane {
            Plane::Axis(a) => AXES[a].to_string(),
            Plane::Inertial { .. } => "(x/s - o).d".to_string(),
        };
        let mut s = format!("{lhs} <= {:.6}", self.value);
        if let Plane::Inertial {
            origin,
            direction,
            scale,
        } = self.plane
        {
            let centroid = origin.map(|o| o * scale);
            s += &format!(
                " with d = {}, centroid {}, s = {scale}",
                vector(&direction, dim),
                vector(&centroid, dim)
            );
        }
        if let Some(t) = self.tie {
            s += &format!(", ties on the cut split at {}", vector(&t, dim));
        }
        s
    }
}

/// A summary line and the cut tree, one cut per line, indented by depth.
impl fmt::Display for Bisection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{} {}-D, k = {}, depth {}, W = {:.3}, max W/T = {:.4}, max |W-T|/T = {:.2e}, \
             max |W-T| = {:.3} (bound {:.3})",
            self.method,
            self.dim,
            self.k(),
            self.depth,
            self.total_weight,
            self.max_ratio,
            self.max_rel_dev,
            self.max_abs_dev,
            self.balance_bound()
        )?;
        for (i, c) in self.cuts.iter().enumerate() {
            writeln!(
                f,
                "{:indent$}[{i}] parts {}..{} | {}..{}: {} ({} | {} objects)",
                "",
                c.low.start,
                c.low.end,
                c.high.start,
                c.high.end,
                c.describe(self.dim),
                c.side_counts[0],
                c.side_counts[1],
                indent = 2 * c.depth as usize
            )?;
        }
        Ok(())
    }
}
