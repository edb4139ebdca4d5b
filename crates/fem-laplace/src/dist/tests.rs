//! Internal checks of the distributed pieces against the serial ones.

use super::*;
use crate::assemble::System;
use crate::solver::Multilevel;
use crate::{AdaptConfig, Adaptive, CornerSingularity};
use comm::{ThreadComm, ThreadOptions};
use std::collections::HashMap;

type P = (u64, u64);
fn key(p: [f64; 2]) -> P {
    (p[0].to_bits(), p[1].to_bits())
}

/// B r, A r and the rows of A, by vertex.
type Ops = (HashMap<P, f64>, HashMap<P, f64>, HashMap<P, Vec<(P, f64)>>);

/// Serial A and B applied to r = f(x, y), by vertex.
fn serial_ops(steps: usize) -> Ops {
    let cfg = AdaptConfig {
        target_vertices: 6_000,
        ..AdaptConfig::default()
    };
    let mut a = Adaptive::new(&CornerSingularity, cfg).unwrap();
    for _ in 0..steps {
        a.step().unwrap();
    }
    let m = a.mesh();
    let sys = System::assemble(m, a.solution());
    let mut pre = Multilevel::new(m, &sys);
    let r: Vec<f64> = m
        .coords()
        .iter()
        .zip(m.boundary_vertices())
        .map(|(p, &b)| {
            if b {
                0.0
            } else {
                (3.0 * p[0]).sin() + p[1] * p[1]
            }
        })
        .collect();
    let mut z = vec![0.0; r.len()];
    pre.apply(m, &r, &mut z);
    let mut y = vec![0.0; r.len()];
    sys.apply(&r, &mut y);
    let bz = m
        .coords()
        .iter()
        .zip(&z)
        .map(|(p, &v)| (key(*p), v))
        .collect();
    let ay = m
        .coords()
        .iter()
        .zip(&y)
        .map(|(p, &v)| (key(*p), v))
        .collect();
    let rows = (0..m.num_vertices())
        .map(|i| {
            (
                key(m.coords()[i]),
                sys.row(i).map(|(c, v)| (key(m.coords()[c]), v)).collect(),
            )
        })
        .collect();
    (bz, ay, rows)
}

#[test]
fn rank_operators_equal_the_serial_ones() {
    for steps in [8usize, 9] {
        let (bz, ay, rows) = serial_ops(steps);
        let cfg = AdaptConfig {
            target_vertices: 6_000,
            ..AdaptConfig::default()
        };
        let out = ThreadComm::run(2, &ThreadOptions::default(), |comm| {
            let mut run = RankRun::new(
                comm,
                &CornerSingularity,
                DistConfig::new(cfg),
                Balancer::flat(),
            )
            .unwrap();
            for _ in 0..steps {
                run.step().unwrap();
            }
            let l = &run.l;
            let owned: Vec<bool> = (0..l.mesh.coords.len()).map(|v| l.owns_vertex(v)).collect();
            let mut sys = System::default();
            sys.assemble_rows(&l.mesh, &l.u, |i| owned[i]);
            let mut pre = Multilevel::new(&l.mesh, &sys);
            let (_, mut skel, _) =
                super::run::setup(run.comm.inner(), l, pre.inv_diag(), &[]).unwrap();
            let r: Vec<f64> = l
                .mesh
                .coords
                .iter()
                .zip(&l.mesh.boundary)
                .map(|(p, &b)| {
                    if b {
                        0.0
                    } else {
                        (3.0 * p[0]).sin() + p[1] * p[1]
                    }
                })
                .collect();
            let mut z = vec![0.0; r.len()];
            skel.apply(run.comm.inner(), &mut pre, l, &r, &mut z)
                .unwrap();
            // The product as CG's matvec computes it: the rows that do not read the halo while
            // it travels (its entries are NaN until it arrives), then the others.
            let halo_rows: Vec<u32> = (0..l.n_owned as u32)
                .filter(|&i| sys.row(i as usize).any(|(c, _)| !owned[c]))
                .collect();
            assert_eq!(sys.halo_rows, halo_rows, "the rows that read the halo");
            assert!(!halo_rows.is_empty() && halo_rows.len() < l.n_owned / 4);
            let mut y = vec![0.0; r.len()];
            let mut rr: Vec<f64> = (0..r.len())
                .map(|v| if owned[v] { r[v] } else { f64::NAN })
                .collect();
            let comm = run.comm.inner();
            let started = run.halo.start(comm, &rr).unwrap();
            let mut sum = sys.apply_rows_except(&rr, &mut y, true, l.n_owned, &sys.halo_rows);
            run.halo.finish(comm, started, &mut rr).unwrap();
            sys.apply_rows_listed(&rr, &mut y, true, &sys.halo_rows, &mut sum);
            let mut y_whole = vec![0.0; r.len()];
            let whole = sys.apply_rows(&rr, &mut y_whole, true, 0..l.n_owned);
            assert_eq!(sum.value().to_bits(), whole.value().to_bits());
            let mut res = Vec::new();
            for v in 0..r.len() {
                if owned[v] {
                    let rowv: Vec<(P, f64)> = sys
                        .row(v)
                        .map(|(c, x)| (key(l.mesh.coords[c]), x))
                        .collect();
                    res.push((key(l.mesh.coords[v]), z[v], y[v], rowv, skel.is_bulk(v)));
                }
            }
            (res, skel.size())
        })
        .unwrap();
        let mut bad_b = 0;
        let mut bad_a = 0;
        for (rank, (res, size)) in out.iter().enumerate() {
            eprintln!("steps {steps} rank {rank}: skeleton {size:?}");
            for (p, z, y, row, bulk) in res {
                if rows[p] != *row && bad_a < 5 {
                    eprintln!(
                        "rank {rank} row at {:?}: serial {:?} dist {:?}",
                        (f64::from_bits(p.0), f64::from_bits(p.1)),
                        rows[p],
                        row
                    );
                }
                if ay[p].to_bits() != y.to_bits() {
                    bad_a += 1;
                }
                if bz[p].to_bits() != z.to_bits() {
                    if bad_b < 5 {
                        eprintln!(
                            "rank {rank} B at {:?} (bulk {bulk}): serial {:e} dist {z:e}",
                            (f64::from_bits(p.0), f64::from_bits(p.1)),
                            bz[p]
                        );
                    }
                    bad_b += 1;
                }
            }
        }
        assert_eq!((bad_a, bad_b), (0, 0), "after {steps} steps");
    }
}
