//! `hsfc` distributed equals serial, on 1 to 4 thread ranks: each rank holds a contiguous
//! slice of a point set that every rank generates identically, runs `Hsfc`'s
//! `Partitioner::partition` (or `repartition`) on the group through the communicator's
//! `part_api::Reduce`, and the gathered parts and the [`Partition`] (cuts, part weights and
//! counts, box, migration) must equal those of the serial call on the union, bit for bit, on
//! every rank. (Every backend's `Reduce` is checked by `comm`'s conformance suite, under MPI
//! too; `cargo xtask ci` also runs `hsfc partition` under `mpirun` against the serial file.)

use comm::conformance::{CheckFailure, check_on_threads};
use comm::{Comm, CommError, ThreadComm, ensure};
use hsfc::generate::{Distribution, WeightKind, points};
use hsfc::{Hsfc, Partition, Workspace};
use part_api::{Par, Partitioner, Points, Reduce, Serial, block_range};
use std::ops::Range;

#[test]
fn dist_equals_serial() {
    for n in 1..=4 {
        check_on_threads(
            n,
            "hsfc_dist_equals_serial",
            hsfc_dist_equals_serial::<ThreadComm>,
        );
    }
}

#[test]
fn dist_uneven_slices() {
    for n in 1..=4 {
        check_on_threads(
            n,
            "hsfc_dist_uneven_slices",
            hsfc_dist_uneven_slices::<ThreadComm>,
        );
    }
}

#[test]
fn repartition_dist() {
    for n in 1..=4 {
        check_on_threads(
            n,
            "hsfc_repartition_dist",
            hsfc_repartition_dist::<ThreadComm>,
        );
    }
}

/// One point set and the sizes to partition it into.
struct Case {
    name: &'static str,
    n: usize,
    dim: usize,
    dist: Distribution,
    weights: WeightKind,
    /// Coordinates rounded to a 1/8 grid: many duplicate points (atoms that straddle rank
    /// boundaries must still go to one part), and every 7th weight 0.
    lattice: bool,
    targets: &'static [f64],
    /// Threads per rank.
    threads: usize,
}

const CASES: [Case; 7] = [
    Case {
        name: "uniform 2-D, unit weights",
        n: 20_000,
        dim: 2,
        dist: Distribution::Uniform,
        weights: WeightKind::Unit,
        lattice: false,
        targets: &[16.0, 19.0, 31.0, 34.0],
        threads: 1,
    },
    Case {
        name: "graded 2-D, random weights",
        n: 20_000,
        dim: 2,
        dist: Distribution::Graded,
        weights: WeightKind::Random,
        lattice: false,
        targets: &[16.0, 19.0, 0.0, 31.0, 34.0],
        threads: 1,
    },
    Case {
        name: "uniform 3-D, random weights, 2 threads per rank",
        n: 12_000,
        dim: 3,
        dist: Distribution::Uniform,
        weights: WeightKind::Random,
        lattice: false,
        targets: &[1.0; 7],
        threads: 2,
    },
    Case {
        name: "graded 3-D, unit weights",
        n: 12_000,
        dim: 3,
        dist: Distribution::Graded,
        weights: WeightKind::Unit,
        lattice: false,
        targets: &[0.0, 16.0, 19.0, 31.0, 34.0, 0.0],
        threads: 1,
    },
    Case {
        // Many distinct points share a cell of the 64-bit keys near the corner: the cuts
        // there split cells (fine keys, sub-key rounds on the candidates of those cells).
        name: "graded 3-D, random weights, 64 parts (cuts inside cells)",
        n: 20_000,
        dim: 3,
        dist: Distribution::Graded,
        weights: WeightKind::Random,
        lattice: false,
        targets: &[1.0; 64],
        threads: 2,
    },
    Case {
        name: "2-D lattice: duplicates, zero weights",
        n: 4000,
        dim: 2,
        dist: Distribution::Uniform,
        weights: WeightKind::Random,
        lattice: true,
        targets: &[1.0, 2.0, 3.0],
        threads: 1,
    },
    Case {
        name: "3 points (fewer than ranks)",
        n: 3,
        dim: 2,
        dist: Distribution::Uniform,
        weights: WeightKind::Random,
        lattice: false,
        targets: &[1.0, 1.0],
        threads: 1,
    },
];

impl Case {
    /// The whole point set, the same on every rank.
    fn points(&self) -> (Vec<f64>, Option<Vec<f64>>) {
        let seed = 0xd15c ^ self.n as u64 ^ ((self.dim as u64) << 20);
        let (mut coords, mut weights) = points(self.n, self.dim, self.dist, self.weights, seed);
        if self.lattice {
            coords
                .iter_mut()
                .for_each(|x| *x = (*x * 8.0).round() / 8.0);
            if let Some(w) = weights.as_mut() {
                w.iter_mut().step_by(7).for_each(|x| *x = 0.0);
            }
        }
        (coords, weights)
    }

    fn hsfc(&self) -> Hsfc {
        Hsfc {
            par: Par::threads(self.threads),
            ..Default::default()
        }
    }
}

/// How the points are dealt to the ranks (contiguous slices in rank order).
#[derive(Debug, Clone, Copy)]
enum Layout {
    /// `[r·n/R, (r+1)·n/R)`, as the `hsfc` CLI reads a file.
    Blocks,
    /// Rank 0 holds nothing, rank r ≥ 1 a share proportional to r.
    Skewed,
}

impl Layout {
    fn range(self, n: usize, rank: usize, size: usize) -> Range<usize> {
        match self {
            Layout::Blocks => {
                let r = block_range(n as u64, rank, size);
                r.start as usize..r.end as usize
            }
            Layout::Skewed if size == 1 => 0..n,
            Layout::Skewed => {
                // Rank q ≥ 1 gets q of the 1 + 2 + … + (size−1) shares.
                let shares = size * (size - 1) / 2;
                let at = |q: usize| n * (q * q.saturating_sub(1) / 2) / shares;
                at(rank)..at(rank + 1)
            }
        }
    }
}

/// Everything a [`Partition`] reports, as bits, each value with its name.
fn fingerprint(p: &Partition) -> Vec<(String, u64)> {
    let mut v = vec![
        ("dim".to_string(), p.dim() as u64),
        ("num_parts".to_string(), p.num_parts() as u64),
        ("num_points".to_string(), p.num_points()),
    ];
    let mut list = |name: &str, values: &mut dyn Iterator<Item = u64>| {
        v.extend(values.enumerate().map(|(i, x)| (format!("{name}[{i}]"), x)));
    };
    let bits = |x: &f64| x.to_bits();
    list("cuts", &mut p.cuts().iter().copied());
    list(
        "fine_cuts (low words)",
        &mut p.fine_cuts().iter().map(|&c| c as u64),
    );
    list("part_counts", &mut p.part_counts().iter().copied());
    list("part_weights", &mut p.part_weights().iter().map(bits));
    list("targets", &mut p.targets().iter().map(bits));
    list("bbox.lo", &mut p.bbox().lo.iter().map(bits));
    list("bbox.hi", &mut p.bbox().hi.iter().map(bits));
    let totals = [p.total_weight(), p.max_weight(), p.weight_quantum()];
    list("total/max weight, quantum", &mut totals.iter().map(bits));
    if let Some(m) = p.migration() {
        let moved = [m.weight.to_bits(), m.count, u64::from(m.kept_cuts)];
        list("migration weight/count/kept_cuts", &mut moved.into_iter());
    }
    v
}

/// Compares this rank's result and slice of parts with the serial ones.
fn compare<C: Comm>(
    c: &C,
    what: &str,
    dist: &Partition,
    serial: &Partition,
    mine: &[u32],
    serial_parts: &[u32],
    range: &Range<usize>,
) -> Result<(), CheckFailure> {
    let (fd, fs) = (fingerprint(dist), fingerprint(serial));
    if let Some(i) = (0..fd.len().max(fs.len())).find(|&i| fd.get(i) != fs.get(i)) {
        return Err(CheckFailure(format!(
            "rank {} of {}: {what}: the distributed result differs from the serial one at {:?} \
             (serial {:?})",
            c.rank(),
            c.size(),
            fd.get(i),
            fs.get(i)
        )));
    }
    // And whatever the accessors do not show.
    ensure!(c, dist == serial, "{what}: {dist:?} != {serial:?}");
    // Every rank checks the whole gathered array; rank 0 also gets it through gatherv, as the
    // CLI writes it.
    let all = c.allgatherv(mine)?;
    let counts = all.counts();
    ensure!(
        c,
        all.data().len() == serial_parts.len(),
        "{what}: gathered {} parts (pieces {counts:?}), expected {}",
        all.data().len(),
        serial_parts.len()
    );
    if let Some(i) = (0..serial_parts.len()).find(|&i| all.data()[i] != serial_parts[i]) {
        return Err(CheckFailure(format!(
            "rank {} of {}: {what}: point {i} is in part {} distributed, {} serially",
            c.rank(),
            c.size(),
            all.data()[i],
            serial_parts[i]
        )));
    }
    ensure!(
        c,
        all.get(c.rank()).len() == range.len(),
        "{what}: own piece of {} parts, slice of {}",
        all.get(c.rank()).len(),
        range.len()
    );
    let at_root = c.gatherv(0, mine)?;
    if let Some(root) = at_root {
        ensure!(
            c,
            root.data() == serial_parts,
            "{what}: gatherv to rank 0 differs from the serial parts"
        );
    }
    Ok(())
}

fn hsfc_err(c: &impl Comm, what: &str, e: hsfc::Error) -> CheckFailure {
    CheckFailure(format!("rank {} of {}: {what}: {e}", c.rank(), c.size()))
}

/// The serial result is a real partition: every point in one part, empty parts exactly where
/// the target is 0 (when there are enough points), counts adding up.
fn sane<C: Comm>(c: &C, what: &str, p: &Partition, parts: &[u32]) -> Result<(), CheckFailure> {
    let k = p.num_parts();
    let mut counts = vec![0u64; k];
    for &q in parts {
        ensure!(c, (q as usize) < k, "{what}: part {q} of {k}");
        counts[q as usize] += 1;
    }
    ensure!(
        c,
        counts == p.part_counts(),
        "{what}: counted {counts:?}, reported {:?}",
        p.part_counts()
    );
    for (q, &t) in p.targets().iter().enumerate() {
        ensure!(
            c,
            t > 0.0 || counts[q] == 0,
            "{what}: part {q} of size 0 holds {} points",
            counts[q]
        );
        ensure!(
            c,
            // (A handful of points cannot fill every part.)
            t == 0.0 || counts[q] > 0 || parts.len() < 100,
            "{what}: part {q} is empty"
        );
    }
    Ok(())
}

fn slice<'a>(
    coords: &'a [f64],
    w: Option<&'a [f64]>,
    dim: usize,
    r: &Range<usize>,
) -> (&'a [f64], Option<&'a [f64]>) {
    (
        &coords[r.start * dim..r.end * dim],
        w.map(|w| &w[r.clone()]),
    )
}

fn partition_cases<C>(c: &C, layout: Layout) -> Result<(), CheckFailure>
where
    C: Comm + Reduce<Error = CommError>,
{
    for case in &CASES {
        let what = format!(
            "{}, sizes {:?} ({layout:?} slices)",
            case.name, case.targets
        );
        let (coords, weights) = case.points();
        let mut serial_parts = vec![0u32; case.n];
        let serial = Hsfc::default()
            .partition(
                &Serial,
                Points::new(&coords, case.dim, weights.as_deref()),
                case.targets,
                &mut serial_parts,
            )
            .map_err(|e| hsfc_err(c, &what, e))?;
        sane(c, &what, &serial, &serial_parts)?;
        let range = layout.range(case.n, Comm::rank(c), Comm::size(c));
        let (my_coords, my_w) = slice(&coords, weights.as_deref(), case.dim, &range);
        let mut mine = vec![u32::MAX; range.len()];
        let dist = case
            .hsfc()
            .partition(
                c,
                Points::new(my_coords, case.dim, my_w),
                case.targets,
                &mut mine,
            )
            .map_err(|e| hsfc_err(c, &what, e))?;
        compare(c, &what, &dist, &serial, &mine, &serial_parts, &range)?;
    }
    Ok(())
}

/// The distributed partition on contiguous blocks `[r·n/R, (r+1)·n/R)` equals the serial partition.
fn hsfc_dist_equals_serial<C>(c: &C) -> Result<(), CheckFailure>
where
    C: Comm + Reduce<Error = CommError>,
{
    partition_cases(c, Layout::Blocks)
}

/// The same with uneven slices: rank 0 holds no point, rank r a share proportional to r.
fn hsfc_dist_uneven_slices<C>(c: &C) -> Result<(), CheckFailure>
where
    C: Comm + Reduce<Error = CommError>,
{
    partition_cases(c, Layout::Skewed)
}

/// KEEP_CUTS: a distributed repartition from the distributed previous partition equals the
/// serial repartition from the serial one, parts and migration included: with new weights and
/// sizes inside the old box (cuts kept where good enough), and with points moved outside it
/// (a new box, fresh cuts).
fn hsfc_repartition_dist<C>(c: &C) -> Result<(), CheckFailure>
where
    C: Comm + Reduce<Error = CommError>,
{
    const BEFORE: &[f64] = &[16.0, 19.0, 31.0, 34.0];
    const AFTER: &[f64] = &[20.0, 20.0, 25.0, 35.0];
    for (case, layout) in [(&CASES[1], Layout::Blocks), (&CASES[2], Layout::Skewed)] {
        let cfg = Hsfc {
            tolerance: 0.1,
            ..case.hsfc()
        };
        let (coords, weights) = case.points();
        let dim = case.dim;
        let n = case.n;
        let range = layout.range(n, Comm::rank(c), Comm::size(c));
        let mut serial_prev_parts = vec![0u32; n];
        let serial_prev = cfg
            .partition(
                &Serial,
                Points::new(&coords, dim, weights.as_deref()),
                BEFORE,
                &mut serial_prev_parts,
            )
            .map_err(|e| hsfc_err(c, case.name, e))?;
        let (my_coords, my_w) = slice(&coords, weights.as_deref(), dim, &range);
        let mut my_prev_parts = vec![0u32; range.len()];
        let prev = cfg
            .partition(
                c,
                Points::new(my_coords, dim, my_w),
                BEFORE,
                &mut my_prev_parts,
            )
            .map_err(|e| hsfc_err(c, case.name, e))?;

        // The load changes: weights grow by up to 100 % depending on the point.
        let new_w: Vec<f64> = (0..n)
            .map(|i| weights.as_ref().map_or(1.0, |w| w[i]) * (1.0 + (i % 5) as f64 * 0.25))
            .collect();
        // The points move: stretched by 1.25 about the origin (some leave the old box).
        let moved: Vec<f64> = coords.iter().map(|x| x * 1.25).collect();
        for (step, pts, kept) in [
            ("new weights and sizes", &coords, true),
            ("moved points", &moved, false),
        ] {
            let what = format!(
                "repartition {:?} -> {:?}, {}, {step} ({layout:?} slices)",
                BEFORE, AFTER, case.name
            );
            let mut serial_parts = serial_prev_parts.clone();
            let serial = cfg
                .repartition(
                    &mut Workspace::default(),
                    &Serial,
                    &serial_prev,
                    Points::new(pts, dim, Some(&new_w)),
                    AFTER,
                    &mut serial_parts,
                )
                .map_err(|e| hsfc_err(c, &what, e))?;
            sane(c, &what, &serial, &serial_parts)?;
            let m = serial.migration();
            ensure!(
                c,
                m.is_some_and(|m| m.kept_cuts == kept && m.count > 0 && m.count < n as u64),
                "{what}: serial migration {m:?}"
            );
            let (my_pts, my_new_w) = slice(pts, Some(&new_w), dim, &range);
            let mut mine = my_prev_parts.clone();
            let dist = cfg
                .repartition(
                    &mut Workspace::default(),
                    c,
                    &prev,
                    Points::new(my_pts, dim, my_new_w),
                    AFTER,
                    &mut mine,
                )
                .map_err(|e| hsfc_err(c, &what, e))?;
            compare(c, &what, &dist, &serial, &mine, &serial_parts, &range)?;
        }
    }
    Ok(())
}
