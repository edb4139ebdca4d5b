use comm::{ThreadComm, ThreadOptions};
use fem_laplace::dist::{Balancer, DistConfig, RankRun};
use fem_laplace::{AdaptConfig, CornerSingularity};
use std::time::Instant;
fn main() {
    let ranks: usize = std::env::args()
        .nth(1)
        .map(|s| s.parse().unwrap())
        .unwrap_or(2);
    let target: usize = std::env::args()
        .nth(2)
        .map(|s| s.parse().unwrap())
        .unwrap_or(524_500);
    let cfg = AdaptConfig {
        target_vertices: target,
        ..AdaptConfig::default()
    };
    let exact = CornerSingularity;
    let mut serial_t = Vec::new();
    for _ in 0..3 {
        let t = Instant::now();
        let mut a = fem_laplace::Adaptive::new(&exact, cfg).unwrap();
        while a.step().unwrap().is_some() {}
        serial_t.push(t.elapsed().as_secs_f64());
    }
    serial_t.sort_by(f64::total_cmp);
    println!("serial median {:.3} s", serial_t[1]);
    let t = Instant::now();
    let res = ThreadComm::run(ranks, &ThreadOptions::default(), |comm| {
        let mut dc = DistConfig::new(cfg);
        dc.mesh_hash = false;
        let mut run = RankRun::new(comm, &exact, dc, Balancer::flat()).unwrap();
        let mut out = Vec::new();
        while let Some(r) = run.step().unwrap() {
            out.push(r);
        }
        out
    })
    .unwrap();
    let total = t.elapsed().as_secs_f64();
    let reps = &res[0];
    for r in reps.iter().skip(12) {
        let t: Vec<String> = r.ranks.iter().map(|x| format!("[mk {:.1} rf {:.1} pt {:.1} mg {:.1} su {:.1} as {:.1} sv {:.1} es {:.1} | wait {:.1} own {} sk {}]", x.times.mark*1e3, x.times.refine*1e3, x.times.partition*1e3, x.times.migrate*1e3, x.times.setup*1e3, x.times.assemble*1e3, x.times.solve*1e3, x.times.estimate*1e3, x.wait_s*1e3, x.owned, x.skeleton)).collect();
        println!(
            "step {} nv {} wall {:.1} ms mig {} {}",
            r.base.step,
            r.base.vertices,
            r.wall_s * 1e3,
            r.migration.elements,
            t.join(" ")
        );
    }
    let last = reps.last().unwrap();
    println!(
        "total {:.3} s, sum of step walls {:.3} s, final error {:e} ({:x}), cg {:?}",
        total,
        reps.iter().map(|r| r.wall_s).sum::<f64>(),
        last.base.error_energy.unwrap(),
        last.base.error_energy.unwrap().to_bits(),
        reps.iter()
            .map(|r| r.base.cg_iterations)
            .collect::<Vec<_>>()
    );
}
