//! The slow, obviously correct recursive bisection the fast one is tested against: every split
//! sorts its objects completely and scans all prefix sums. It shares only the specification
//! (key choice, inertia, target split) with the fast code, not the selection machinery.

use super::select::before;
use super::serial::inertial;
use super::*;
use crate::input::validate;
use part_api::Serial;

pub(crate) struct RefCut {
    pub plane: Plane,
    pub value: f64,
    pub tie: Option<[f64; 3]>,
    pub counts: [usize; 2],
}

fn sort_set<const D: usize>(dots: &mut [Dot<D>], key: &impl Key<D>) -> Vec<f64> {
    dots.sort_by(|a, b| {
        let (ka, kb) = (key.key(&a.x), key.key(&b.x));
        if before(ka, a, kb, b) {
            std::cmp::Ordering::Less
        } else {
            std::cmp::Ordering::Greater
        }
    });
    dots.iter().map(|d| key.key(&d.x)).collect()
}

/// The cuts of `dots` among the parts `p0..p0 + k`; `spec`: the method and `keep_ties`.
fn rec<const D: usize>(
    spec: (Method, bool),
    input: &Input,
    mut dots: Vec<Dot<D>>,
    p0: usize,
    k: usize,
    parts: &mut [u32],
    cuts: &mut Vec<RefCut>,
) {
    if k == 1 {
        for d in &dots {
            parts[d.id as usize] = p0 as u32;
        }
        return;
    }
    let (method, keep_ties) = spec;
    let st = dots.iter().fold(Stats::EMPTY, |mut s, d| {
        s.add(d, 0.0);
        s
    });
    let keys = match method {
        Method::Rcb => {
            let axis = st.longest_axis();
            let keys = sort_set(&mut dots, &AxisKey(axis));
            cuts.push(RefCut {
                plane: Plane::Axis(axis),
                value: 0.0,
                tie: None,
                counts: [0, 0],
            });
            keys
        }
        Method::Rib => {
            let (plane, key) = inertial(&dots, &st, input.unit, Par::Seq);
            let keys = sort_set(&mut dots, &key);
            cuts.push(RefCut {
                plane,
                value: 0.0,
                tie: None,
                counts: [0, 0],
            });
            keys
        }
    };
    let me = cuts.len() - 1;
    let half = k / 2;
    let t_low: f64 = input.fractions[p0..p0 + half].iter().sum();
    let t_high: f64 = input.fractions[p0 + half..p0 + k].iter().sum();
    let total: u64 = dots.iter().map(|d| d.w as u64).sum();
    let unit = input.unit || total == 0;
    let mut prefix = vec![0u64];
    for d in &dots {
        prefix.push(prefix.last().unwrap() + if unit { 1 } else { d.w as u64 });
    }
    let n = dots.len();
    let sel_total = prefix[n];
    let mut tau = 0;
    let mut m = if t_low == 0.0 || n == 0 {
        0
    } else if t_high == 0.0 {
        n
    } else {
        tau = ((sel_total as f64 * (t_low / (t_low + t_high))).round() as u64).min(sel_total);
        if tau == 0 {
            0
        } else {
            let below = (0..=n).rev().find(|&m| prefix[m] < tau).unwrap();
            let above = (0..=n).find(|&m| prefix[m] >= tau).unwrap();
            if prefix[above] - tau < tau - prefix[below] {
                above
            } else {
                below
            }
        }
    };
    if keep_ties && m > 0 && m < n && keys[m - 1] == keys[m] {
        let kv = keys[m];
        let down = (0..m).find(|&i| keys[i] == kv).unwrap();
        let up = (m..n).find(|&i| keys[i] != kv).unwrap_or(n);
        m = if prefix[up].abs_diff(tau) < prefix[down].abs_diff(tau) {
            up
        } else {
            down
        };
    }
    let (value, tie) = if m == 0 {
        (f64::NEG_INFINITY, None)
    } else if m == n {
        (f64::INFINITY, None)
    } else if keys[m - 1] < keys[m] {
        (between(keys[m - 1], keys[m]), None)
    } else {
        let mut t = [0.0; 3];
        t[..D].copy_from_slice(&dots[m - 1].x);
        (keys[m - 1], Some(t))
    };
    cuts[me].value = value;
    cuts[me].tie = tie;
    cuts[me].counts = [m, n - m];
    let high = dots.split_off(m);
    rec(spec, input, dots, p0, half, parts, cuts);
    rec(spec, input, high, p0 + half, k - half, parts, cuts);
}

/// Parts and cuts (in preorder) by the reference algorithm.
pub(crate) fn partition(
    method: Method,
    keep_ties: bool,
    coords: &[f64],
    dim: usize,
    weights: Option<&[f64]>,
    targets: &[f64],
) -> (Vec<u32>, Vec<RefCut>) {
    let n = coords.len() / dim;
    let input = validate(coords, dim, weights, targets, n, Par::Seq).unwrap();
    let mut parts = vec![u32::MAX; n];
    let mut cuts = Vec::new();
    fn go<const D: usize>(
        method: Method,
        keep_ties: bool,
        input: &Input,
        coords: &[f64],
        weights: Option<&[f64]>,
        parts: &mut [u32],
        cuts: &mut Vec<RefCut>,
    ) {
        let dots = (0..input.n)
            .map(|i| Dot::<D>::of(coords, weights, input, i))
            .collect();
        let k = input.fractions.len();
        rec((method, keep_ties), input, dots, 0, k, parts, cuts);
    }
    match dim {
        1 => go::<1>(
            method, keep_ties, &input, coords, weights, &mut parts, &mut cuts,
        ),
        2 => go::<2>(
            method, keep_ties, &input, coords, weights, &mut parts, &mut cuts,
        ),
        _ => go::<3>(
            method, keep_ties, &input, coords, weights, &mut parts, &mut cuts,
        ),
    }
    (parts, cuts)
}

#[cfg(test)]
mod tests {
    use super::*;
    use hsfc::generate::{RandomSource, Xoshiro256};

    /// Points with many exact ties (coordinates on a coarse lattice) or none.
    fn case(rng: &mut Xoshiro256, n: usize, dim: usize, lattice: bool) -> Vec<f64> {
        (0..n * dim)
            .map(|_| {
                if lattice {
                    (rng.next_u64() % 5) as f64 * 0.25
                } else {
                    rng.uniform() * 10.0 - 3.0
                }
            })
            .collect()
    }

    #[test]
    fn fast_equals_reference() {
        let mut rng = Xoshiro256::new(42);
        let (mut ties, mut empty_sides) = (0, 0);
        for c in 0..240 {
            let dim = 1 + c % 3;
            let n = [0, 1, 3, 17, 60, 200, 1500, 7000][c % 8];
            let lattice = c % 5 == 0;
            let coords = case(&mut rng, n, dim, lattice);
            let weights: Option<Vec<f64>> = match c % 4 {
                0 => None,
                1 => Some((0..n).map(|_| 1.0 + 9.0 * rng.uniform()).collect()),
                2 => Some((0..n).map(|_| (rng.next_u64() % 3) as f64).collect()),
                _ => Some((0..n).map(|_| rng.normal().exp()).collect()),
            };
            let k = 1 + (rng.next_u64() % 13) as usize;
            let targets: Vec<f64> = (0..k)
                .map(|_| {
                    if rng.next_u64().is_multiple_of(6) {
                        0.0
                    } else {
                        rng.uniform() + 0.1
                    }
                })
                .collect();
            let targets = if targets.iter().all(|&t| t == 0.0) {
                vec![1.0; k]
            } else {
                targets
            };
            for method in [Method::Rcb, Method::Rib] {
                for keep_ties in [false, true] {
                    let (ref_parts, ref_cuts) = partition(
                        method,
                        keep_ties,
                        &coords,
                        dim,
                        weights.as_deref(),
                        &targets,
                    );
                    let mut parts = vec![0; n];
                    let b = Bisector {
                        method,
                        keep_ties,
                        par: Par::Seq,
                    };
                    let points = Points::new(&coords, dim, weights.as_deref());
                    let r = b.run(&Serial, points, &targets, &mut parts).unwrap();
                    let what = format!("case {c}: {method} keep_ties={keep_ties} n={n} k={k}");
                    assert_eq!(parts, ref_parts, "{what}");
                    assert_eq!(r.cuts.len(), ref_cuts.len(), "{what}");
                    for (a, b) in r.cuts.iter().zip(&ref_cuts) {
                        ties += a.tie.is_some() as usize;
                        empty_sides += a.value.is_infinite() as usize;
                        assert_eq!(a.plane, b.plane, "{what}");
                        assert_eq!(a.value.to_bits(), b.value.to_bits(), "{what}");
                        assert_eq!(a.tie, b.tie, "{what}");
                        assert_eq!(a.side_counts, b.counts, "{what}");
                    }
                }
            }
        }
        // The cases exercise split ties and empty sides.
        assert!(
            ties > 50 && empty_sides > 50,
            "{ties} ties, {empty_sides} empty sides"
        );
    }

    /// The moment sums of `dots` one object at a time in u128, as the specification says
    /// ([`moment_sums_of`]'s blocks, clamps and split products must give the same integers).
    fn plain_moment_sums<const D: usize>(dots: &[Dot<D>], st: &Stats<D>) -> MomentSums<D> {
        let (_, f1, f2) = moment_scale(st);
        let mut a: MomentSums<D> = (0, [0; D], [[0; D]; D]);
        for d in dots {
            let y: [u128; D] =
                std::array::from_fn(|j| ((d.x[j] - st.lo[j]) * f1 * f2 + 0.5) as u64 as u128);
            let w = u128::from(d.w);
            a.0 += d.w as u64;
            for i in 0..D {
                a.1[i] += w * y[i];
                for j in i..D {
                    a.2[i][j] += w * y[i] * y[j];
                }
            }
        }
        a
    }

    #[test]
    fn moment_sums_are_the_plain_sums() {
        let mut rng = Xoshiro256::new(7);
        // Lengths around the chunk and the weighted block; weights up to u32::MAX, the
        // largest products the blocks must hold.
        for n in [1, 5, 1023, 1024, 1025, CHUNK - 1, CHUNK, 3 * CHUNK + 17] {
            let dots: Vec<Dot<3>> = (0..n)
                .map(|i| Dot {
                    x: [
                        rng.uniform() * 7.0 - 2.0,
                        rng.uniform(),
                        1e6 * rng.uniform(),
                    ],
                    w: match i % 3 {
                        0 => u32::MAX,
                        1 => (rng.next_u64() >> 32) as u32,
                        _ => 1,
                    },
                    id: i as u32,
                })
                .collect();
            let mut st = Stats::EMPTY;
            for d in &dots {
                st.add(d, 0.0);
            }
            let want = plain_moment_sums(&dots, &st);
            for par in [Par::Seq, Par::threads(2)] {
                let got = par.install(|| moment_sums(&dots, &st, false, par)).unwrap();
                assert_eq!(got, want, "n {n}, weighted");
            }
            let unit: Vec<Dot<3>> = dots.iter().map(|d| Dot { w: 1, ..*d }).collect();
            let want = plain_moment_sums(&unit, &st);
            assert_eq!(moment_sums(&unit, &st, true, Par::Seq), want, "n {n}, unit");
        }
    }
}
