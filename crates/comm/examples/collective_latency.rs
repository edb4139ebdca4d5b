//! Median times of the basic collectives, on either backend.
//!
//! Threads (default): `cargo run --release -p comm --example collective_latency [RANKS...]`
//! MPI: `cargo build --release -p comm --features mpi --example collective_latency` and
//! `mpirun -np 4 target/release/examples/collective_latency`.

use comm::{Comm, CommError, LinkProbe, ReduceOp, ThreadComm, ThreadOptions, measure_link};

const REPEATS: usize = 201;

fn median_time<C: Comm>(
    c: &C,
    mut f: impl FnMut() -> Result<(), CommError>,
) -> Result<f64, CommError> {
    let mut times = Vec::with_capacity(REPEATS);
    for _ in 0..REPEATS {
        c.barrier()?;
        let t0 = c.wtime();
        f()?;
        let mut t = [c.wtime() - t0];
        c.allreduce_f64(ReduceOp::Max, &mut t)?;
        times.push(t[0]);
    }
    times.sort_by(f64::total_cmp);
    Ok(times[REPEATS / 2])
}

/// (what, median seconds) for each collective.
fn measure<C: Comm>(c: &C) -> Result<Vec<(String, f64)>, CommError> {
    let n = c.size();
    let mut out = Vec::new();
    out.push(("barrier".into(), median_time(c, || c.barrier())?));
    let mut one = [1.0];
    out.push((
        "allreduce_f64 sum, 1 value".into(),
        median_time(c, || c.allreduce_f64(ReduceOp::Sum, &mut one))?,
    ));
    let mut many = vec![1.0; 1 << 16];
    out.push((
        "allreduce_f64 sum, 64 Ki values".into(),
        median_time(c, || c.allreduce_f64(ReduceOp::Sum, &mut many))?,
    ));
    let send = vec![7u8; n << 20];
    let counts = vec![1usize << 20; n];
    out.push((
        "alltoallv, 1 MiB to each rank".into(),
        median_time(c, || c.alltoallv_bytes(&send, &counts).map(|_| ()))?,
    ));
    let link = measure_link(c, 0, n - 1, &LinkProbe::default())?;
    // Timing noise can make the line impossible (NaN then: measure again).
    let fit = link.fit().unwrap_or(comm::LinkModel {
        alpha: f64::NAN,
        beta: f64::NAN,
    });
    out.push((format!("link 0<->{}: alpha (s)", n - 1), fit.alpha));
    out.push((format!("link 0<->{}: beta (s/B)", n - 1), fit.beta));
    Ok(out)
}

fn print(backend: &str, n: usize, rows: &[(String, f64)]) {
    println!("{backend}, {n} ranks (median of {REPEATS}):");
    for (what, t) in rows {
        if what.contains("beta") {
            println!("  {what:<36} {:>10.3} ns/B", t * 1e9);
        } else {
            println!("  {what:<36} {:>10.2} us", t * 1e6);
        }
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    #[cfg(feature = "mpi")]
    if std::env::var_os("OMPI_COMM_WORLD_SIZE").is_some() || std::env::var_os("PMI_SIZE").is_some()
    {
        let world = comm::MpiComm::init()?;
        let rows = measure(&world)?;
        if world.rank() == 0 {
            print("MpiComm", world.size(), &rows);
        }
        return Ok(());
    }
    let ranks: Vec<usize> = std::env::args()
        .skip(1)
        .map(|a| a.parse())
        .collect::<Result<_, _>>()?;
    for n in if ranks.is_empty() { vec![2, 4] } else { ranks } {
        let rows = ThreadComm::run(n, &ThreadOptions::default(), |c| measure(&c))?;
        print("ThreadComm", n, &rows.into_iter().next().expect("rank 0")?);
    }
    Ok(())
}
