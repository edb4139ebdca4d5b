//! The simulator's calibration, from a run measured on this host (two dedicated ranks,
//! uniform parts: `fem-laplace --json` step lines) and a link measurement between two thread
//! ranks.

use crate::error::{Context, Result, bail};
use crate::meshes::StepMesh;
use comm::{LinkModel, LinkProbe, ThreadComm, ThreadOptions};
use serde::Serialize;

/// What the model takes from measurements.
#[derive(Debug, Clone, Serialize)]
pub struct Calib {
    /// Seconds per element at each step on one dedicated core of this host: a rank's time
    /// outside collectives (less the repartition's `p`, if the step repartitioned) over its
    /// elements; the slower rank's.
    pub a: Vec<f64>,
    /// Seconds per step both ranks waited in collectives at once (this host's latency).
    pub l: Vec<f64>,
    /// Repartition seconds per element and rank: `hier-part` on the last mesh, two equal
    /// parts, in this process (median of 3), per element, halved.
    pub p: f64,
    /// The host core's LINPACK rating (the machine file's).
    pub host_mflops: f64,
    /// Bytes sent per cut edge and CG iteration (all of a step's messages but the
    /// migration's, over the cut edges of the run's partition and the iterations; median).
    pub bytes_per_cut_iteration: f64,
    /// Bytes a migrated element takes (measured migrations; median).
    pub bytes_per_element: f64,
    /// The monitoring agents' CPU over wall (mean over the ranks of a monitored run).
    pub monitor_overhead: f64,
    /// Seconds of extra common waiting per CG iteration when a rank gets only part of its
    /// CPU, per unit of the share it lacks (set so that the simulated time of a measured run
    /// with a competing process equals its measured time; 0 until calibrated).
    pub kappa: f64,
    /// α, β between two thread ranks of this host.
    #[serde(serialize_with = "link_json")]
    pub link: LinkModel,
}

fn link_json<S: serde::Serializer>(l: &LinkModel, s: S) -> Result<S::Ok, S::Error> {
    (l.alpha, l.beta).serialize(s)
}

fn median(mut v: Vec<f64>) -> f64 {
    part_api::median(&mut v)
}

fn num(v: &serde_json::Value, what: &str) -> Result<f64> {
    v.as_f64().with_context(|| format!("no number `{what}`"))
}

/// The link between two thread ranks on cores 0 and 1 (a fit of 8 B and 1 MiB exchanges).
pub fn host_link() -> Result<LinkModel> {
    let probe = LinkProbe {
        repeats: 15,
        ..LinkProbe::default()
    };
    let out = ThreadComm::run(2, &ThreadOptions::default(), |c| {
        comm::measure_link(&c, 0, 1, &probe)
    })
    .context("measuring the link between two thread ranks")?;
    let t = out
        .into_iter()
        .next()
        .context("no rank")?
        .context("measuring the link")?;
    t.fit().context("fitting the link between two thread ranks")
}

/// The calibration from the step lines `steps` of a dedicated uniform 2-rank run over the
/// meshes `seq` (the same run: the meshes are equal to the bit), with `cut_edges(k)` the
/// cut edges of the simulator's own 2-rank partition of step k and `p` the repartition's
/// seconds per element and rank.
pub fn calibrate(
    steps: &[serde_json::Value],
    seq: &[StepMesh],
    cut_edges: impl Fn(usize) -> f64,
    p: f64,
    host_mflops: f64,
    monitor_overhead: f64,
    link: LinkModel,
) -> Result<Calib> {
    if steps.len() != seq.len() {
        bail!(
            "the calibration run has {} steps, the serial run {}",
            steps.len(),
            seq.len()
        );
    }
    let (mut a, mut l) = (Vec::new(), Vec::new());
    let (mut bpc, mut bpe) = (Vec::new(), Vec::new());
    for (k, s) in steps.iter().enumerate() {
        let wall = num(&s["wall_s"], "wall_s")?;
        let ranks = s["ranks"].as_array().context("no `ranks`")?;
        let n = seq[k].elements() as f64;
        // The repartition's own cost is the model's `p`, charged where a run repartitions.
        let repartitioned = s["balance"]["decision"]["rebalance"].as_bool() == Some(true);
        let own = if repartitioned {
            p * n / ranks.len() as f64
        } else {
            0.0
        };
        let (mut per_element, mut busy_max, mut sent) = (0.0f64, 0.0f64, 0.0);
        for r in ranks {
            let busy = (wall - num(&r["wait_s"], "wait_s")?).max(0.0);
            let work = num(&r["work"], "work")?.max(1.0);
            per_element = per_element.max((busy - own).max(0.0) / work);
            busy_max = busy_max.max(busy);
            sent += num(&r["bytes"], "bytes")?;
        }
        a.push(per_element);
        l.push((wall - busy_max).max(0.0));
        let mig_bytes = num(&s["migration"]["bytes"], "migration.bytes")?;
        let mig_elems = num(&s["migration"]["elements"], "migration.elements")?;
        if mig_elems > 0.0 {
            bpe.push(mig_bytes / mig_elems);
        }
        let cut = cut_edges(k);
        let iters = seq[k].cg_iterations as f64;
        if k >= 3 && cut > 0.0 && iters > 0.0 {
            bpc.push((sent - mig_bytes).max(0.0) / (cut * iters));
        }
    }
    let bytes_per_element = median(bpe);
    let bytes_per_cut_iteration = median(bpc);
    for (what, v) in [
        ("bytes per migrated element", bytes_per_element),
        ("bytes per cut edge and iteration", bytes_per_cut_iteration),
    ] {
        if !v.is_finite() {
            bail!("the calibration run gives no {what} (too few steps?)");
        }
    }
    Ok(Calib {
        a,
        l,
        p,
        host_mflops,
        bytes_per_cut_iteration,
        bytes_per_element,
        monitor_overhead,
        kappa: 0.0,
        link,
    })
}
