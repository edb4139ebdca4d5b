//! `cargo xtask run-laplace`: the main job. DRUM in the loop on a machine description
//! (default `machines/local-2core-hetero.xml`, with the competing load its file describes):
//! the adaptive Laplace run of the DRUM experiments (PHAML's 17 steps to 524,500 vertices)
//! over the machine's ranks (threads of one process, or MPI processes under `mpirun`), each
//! rank pinned to its node's CPUs and watched by its monitoring agent, the elements
//! repartitioned after each refinement with the monitored powers when the rebalance policy
//! says so. One progress line per step on stderr, the summary on stdout, the results in
//! `out/run-laplace/`. `--compare` runs uniform and monitored back to back and prints RC and
//! RC_ideal (DRUM 2005 §4.1). `--vcluster` runs the MPI ranks across the namespaces of
//! `cargo xtask vcluster` (default machine `machines/vcluster-2.xml`), each node's agent
//! reading its own link's counters; `--net-load` adds a competing TCP flow on a node's link.

use crate::vcluster::job::{Cluster, Sink};
use anyhow::{Context, Result, bail};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;

/// How the ranks run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Backend {
    Threads,
    Mpi,
}

/// Options of `run-laplace`, parsed from its arguments.
#[derive(Debug)]
pub(crate) struct Options {
    pub(crate) machine: String,
    pub(crate) backend: Backend,
    pub(crate) hostfile: Option<String>,
    /// Run across the vcluster's namespaces (`--vcluster`).
    pub(crate) vcluster: bool,
    /// `--net-load` specs (with `--vcluster`).
    pub(crate) net_loads: Vec<String>,
    pub(crate) balance: String,
    pub(crate) w_comm: String,
    /// `--load` specs; empty: the machine file's loads (unless `no_load`).
    pub(crate) loads: Vec<String>,
    pub(crate) no_load: bool,
    pub(crate) compare: bool,
    pub(crate) json: bool,
    pub(crate) out: PathBuf,
    /// Passed through to `fem-laplace`.
    pub(crate) fem_args: Vec<String>,
    pub(crate) vtk: Option<String>,
    pub(crate) svg: Option<String>,
}

/// `fem-laplace` flags with a value that run-laplace passes through.
const FEM_FLAGS_WITH_VALUE: &[&str] = &[
    "--target-vertices",
    "--problem",
    "--marking",
    "--cg-tol-factor",
    "--eff-min",
    "--gamma",
    "--drift",
    "--monitor-period-ms",
    "--util-basis",
    "--power-floor",
    "--rebalance",
    "--sensing",
    "--transfer",
    "--capacity",
];

const KNOWN: &str = "--machine FILE, --backend threads|mpi, --hostfile FILE, --vcluster, \
     --net-load NODE[:MBIT][@STEP[-END]], \
     --balance uniform|static|monitored, --w-comm W, --load RANK[:N][@STEP[-END]], --no-load, \
     --compare, --json, --out DIR, --vtk DIR, --svg FILE, --target-vertices N, --problem P, \
     --marking M, --cg-tol-factor F, --eff-min E, --gamma G, --drift D, --monitor-period-ms MS, \
     --util-basis window|runnable, --power-floor F, --rebalance policy|always|never, \
     --sensing N|once, --transfer hbm|gde|implicit, --capacity static|measured";

pub(crate) fn parse(args: &[String]) -> Result<Options> {
    let mut o = Options {
        machine: "machines/local-2core-hetero.xml".into(),
        backend: Backend::Threads,
        hostfile: None,
        vcluster: false,
        net_loads: Vec::new(),
        balance: "monitored".into(),
        w_comm: "0".into(),
        loads: Vec::new(),
        no_load: false,
        compare: false,
        json: false,
        out: PathBuf::from("out/run-laplace"),
        fem_args: Vec::new(),
        vtk: None,
        svg: None,
    };
    let (mut machine_given, mut backend_given) = (false, false);
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut value = |flag: &str| match it.next() {
            Some(v) => Ok(v.clone()),
            None => bail!("run-laplace: {flag} needs a value"),
        };
        match a.as_str() {
            "--machine" => {
                o.machine = value(a)?;
                machine_given = true;
            }
            "--vcluster" => o.vcluster = true,
            "--net-load" => o.net_loads.push(value(a)?),
            "--backend" => {
                backend_given = true;
                o.backend = match value(a)?.as_str() {
                    "threads" => Backend::Threads,
                    "mpi" => Backend::Mpi,
                    other => bail!("run-laplace: --backend {other}: expected threads or mpi"),
                }
            }
            "--hostfile" => o.hostfile = Some(value(a)?),
            "--balance" => {
                o.balance = value(a)?;
                if !["uniform", "static", "monitored"].contains(&o.balance.as_str()) {
                    bail!(
                        "run-laplace: --balance {}: expected uniform, static or monitored",
                        o.balance
                    );
                }
            }
            "--w-comm" => o.w_comm = value(a)?,
            "--load" => o.loads.push(value(a)?),
            "--no-load" => o.no_load = true,
            "--compare" => o.compare = true,
            "--json" => o.json = true,
            "--out" => o.out = PathBuf::from(value(a)?),
            "--vtk" => o.vtk = Some(value(a)?),
            "--svg" => o.svg = Some(value(a)?),
            f if FEM_FLAGS_WITH_VALUE.contains(&f) => {
                let v = value(f)?;
                o.fem_args.extend([a.clone(), v]);
            }
            other => bail!("run-laplace: unknown flag `{other}` (known: {KNOWN})"),
        }
    }
    if o.no_load && !o.loads.is_empty() {
        bail!("run-laplace: --no-load and --load contradict each other");
    }
    if o.vcluster {
        if backend_given && o.backend != Backend::Mpi {
            bail!("run-laplace: --vcluster runs MPI ranks; leave --backend out");
        }
        if o.hostfile.is_some() {
            bail!("run-laplace: --vcluster makes its own hostfile; leave --hostfile out");
        }
        o.backend = Backend::Mpi;
        if !machine_given {
            o.machine = "machines/vcluster-2.xml".into();
        }
    } else if !o.net_loads.is_empty() {
        bail!("run-laplace: --net-load needs --vcluster (the flow runs on a node's link)");
    }
    if o.hostfile.is_some() && o.backend != Backend::Mpi {
        bail!("run-laplace: --hostfile is for --backend mpi");
    }
    if o.compare && o.balance != "monitored" {
        bail!("run-laplace: --compare runs uniform and monitored; leave --balance out");
    }
    Ok(o)
}

/// Where one run's files go.
struct Outputs {
    jsonl: PathBuf,
    summary: PathBuf,
    plot: PathBuf,
    svg: PathBuf,
    vtk: PathBuf,
}

impl Outputs {
    fn new(o: &Options, tag: &str) -> Outputs {
        let f = |name: &str| o.out.join(format!("{tag}{name}"));
        Outputs {
            jsonl: f("steps.jsonl"),
            summary: f("summary.json"),
            plot: f("balance.svg"),
            svg: o
                .svg
                .as_ref()
                .map_or_else(|| f("partition.svg"), PathBuf::from),
            vtk: o.vtk.as_ref().map_or_else(|| f("vtk"), PathBuf::from),
        }
    }
}

/// The `fem-laplace` arguments of one run with `balance` (`sink`: where `--net-load` flows go).
fn fem_args(
    o: &Options,
    balance: &str,
    files: &Outputs,
    progress: bool,
    sink: Option<SocketAddr>,
) -> Vec<String> {
    let mut a: Vec<String> = vec![
        "--machine".into(),
        o.machine.clone(),
        "--balance".into(),
        balance.into(),
        "--w-comm".into(),
        o.w_comm.clone(),
    ];
    if o.loads.is_empty() && !o.no_load {
        a.push("--machine-load".into());
    }
    for l in &o.loads {
        a.extend(["--load".into(), l.clone()]);
    }
    if let Some(sink) = sink {
        for l in &o.net_loads {
            a.extend(["--net-load".into(), l.clone()]);
        }
        a.extend(["--net-sink".into(), sink.to_string()]);
    }
    a.extend(o.fem_args.iter().cloned());
    if progress {
        a.push("--progress".into());
    }
    if o.json {
        a.push("--json".into());
    }
    let path = |p: &Path| p.display().to_string();
    a.extend([
        "--jsonl".into(),
        path(&files.jsonl),
        "--summary-json".into(),
        path(&files.summary),
        "--plot".into(),
        path(&files.plot),
        "--svg".into(),
        path(&files.svg),
        "--vtk".into(),
        path(&files.vtk),
        "--vtk-last".into(),
    ]);
    a
}

/// The binaries a run needs: `fem-laplace` (built for the backend) and `drum` (to read the
/// machine's rank count for `mpirun -np`).
pub(crate) struct Bins {
    pub(crate) fem: PathBuf,
    pub(crate) drum: PathBuf,
}

/// Builds the release binaries (`fem-laplace` with MPI for `--backend mpi`, copied aside so
/// that the plain build stays in place).
pub(crate) fn build(backend: Backend) -> Result<Bins> {
    let release = |package: &str, bin: &str, features: &[&str]| -> Result<PathBuf> {
        let mut args = vec!["--quiet", "-p", package, "--bin", bin];
        args.extend(features);
        Ok(crate::release(&args)?.join(bin))
    };
    let drum = release("drum-cli", "drum", &[])?;
    let fem = match backend {
        Backend::Threads => release("fem-laplace-cli", "fem-laplace", &[])?,
        Backend::Mpi => {
            let built = release("fem-laplace-cli", "fem-laplace", &["--features", "mpi"])?;
            let to = built.with_file_name("fem-laplace-mpi");
            std::fs::copy(&built, &to)
                .with_context(|| format!("copying {} to {}", built.display(), to.display()))?;
            to
        }
    };
    Ok(Bins { fem, drum })
}

/// The number of ranks a machine file describes, from `drum check` (xtask reads no machine
/// file itself): its first line ends with `N ranks`.
fn machine_ranks(drum: &Path, machine: &str) -> Result<usize> {
    let out = Command::new(drum)
        .current_dir(crate::project_root())
        .args(["check", machine])
        .output()
        .context("running drum check")?;
    if !out.status.success() {
        bail!("{}", String::from_utf8_lossy(&out.stderr));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    ranks_of_check(&text).with_context(|| format!("cannot read the ranks of {machine}:\n{text}"))
}

fn ranks_of_check(text: &str) -> Option<usize> {
    let first = text.lines().next()?;
    let head = first
        .strip_suffix(" ranks")
        .or_else(|| first.strip_suffix(" rank"))?;
    head.rsplit(' ').next()?.parse().ok()
}

/// Where a `--vcluster` run goes: the cluster and, with `--net-load`, the flows' sink (which
/// stops before the cluster goes down, if the run brought it up).
pub(crate) struct OnVcluster {
    pub(crate) sink: Option<Sink>,
    pub(crate) cluster: Cluster,
}

impl OnVcluster {
    /// The cluster of `o.machine` (brought up if needed) and the sink if `o` has flows.
    pub(crate) fn start(o: &Options, drum: &Path) -> Result<OnVcluster> {
        let cluster = Cluster::ensure(drum, &o.machine)?;
        let sink = match o.net_loads.is_empty() {
            true => None,
            false => Some(Sink::start(&cluster.state)?),
        };
        Ok(OnVcluster { sink, cluster })
    }
}

/// The steps of a run's `steps.jsonl`.
pub(crate) fn steps_of(path: &Path) -> Result<Vec<serde_json::Value>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    text.lines()
        .map(|l| {
            serde_json::from_str(l).with_context(|| format!("{}: not JSON: {l}", path.display()))
        })
        .collect()
}

/// The mesh hash of each step of a run's `steps.jsonl`.
pub(crate) fn mesh_hashes(path: &Path) -> Result<Vec<String>> {
    steps_of(path)?
        .iter()
        .map(|v| {
            v["mesh_hash"]
                .as_str()
                .map(String::from)
                .with_context(|| format!("{}: a step without mesh_hash", path.display()))
        })
        .collect()
}

/// One run of `fem-laplace` with `balance`; returns its summary (JSON).
pub(crate) fn run_once(
    o: &Options,
    bins: &Bins,
    balance: &str,
    tag: &str,
    progress: bool,
    vc: Option<&OnVcluster>,
) -> Result<serde_json::Value> {
    let bin = &bins.fem;
    let files = Outputs::new(o, tag);
    std::fs::create_dir_all(&files.vtk)
        .with_context(|| format!("cannot create {}", files.vtk.display()))?;
    let sink = vc.and_then(|v| v.sink.as_ref()).map(|s| s.addr);
    let args = fem_args(o, balance, &files, progress, sink);
    if let Some(vc) = vc {
        let np = machine_ranks(&bins.drum, &o.machine)?;
        let mut a: Vec<String> = vec!["-np".into(), np.to_string()];
        a.push(bin.display().to_string());
        a.extend(["--backend".into(), "mpi".into()]);
        a.extend(args);
        vc.cluster.mpirun(&a)?;
        return read_summary(&files);
    }
    let cmd = match o.backend {
        Backend::Threads => {
            let mut c = Command::new(bin);
            c.args(&args);
            c
        }
        Backend::Mpi => {
            let np = machine_ranks(&bins.drum, &o.machine)?;
            let mut c = Command::new("mpirun");
            if crate::is_root() {
                c.arg("--allow-run-as-root");
            }
            // fem-laplace pins each rank to its node's cpus itself.
            c.args([
                "--bind-to",
                "none",
                "--oversubscribe",
                "-np",
                &np.to_string(),
            ]);
            if let Some(h) = &o.hostfile {
                c.args(["--hostfile", h]);
            }
            c.arg(bin).arg("--backend").arg("mpi").args(&args);
            c
        }
    };
    let mut cmd = cmd;
    cmd.current_dir(crate::project_root());
    crate::run(cmd)?;
    read_summary(&files)
}

fn read_summary(files: &Outputs) -> Result<serde_json::Value> {
    let path = crate::project_root().join(&files.summary);
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("{} is not JSON", path.display()))
}

/// Runs the main job with `args`.
pub fn run_laplace(args: &[String]) -> Result<()> {
    let o = parse(args)?;
    if o.vcluster
        && let Some(why) = crate::vcluster::system::cannot_make_namespaces()
    {
        bail!("run-laplace --vcluster: {why}");
    }
    let bins = build(o.backend)?;
    let root = crate::project_root();
    std::fs::create_dir_all(root.join(&o.out))
        .with_context(|| format!("cannot create {}", o.out.display()))?;
    let vc = match o.vcluster {
        true => Some(OnVcluster::start(&o, &bins.drum)?),
        false => None,
    };
    let result = run_main(&o, &bins, vc.as_ref());
    if let Some(sink) = vc.and_then(|mut v| v.sink.take()) {
        let (conns, bytes) = sink.stop();
        eprintln!(
            "run-laplace: the flows' sink received {:.2} MB over {conns} connection{}",
            bytes as f64 / 1e6,
            if conns == 1 { "" } else { "s" }
        );
    }
    result
}

/// The run (or the two of `--compare`) once the vcluster, if any, is up.
fn run_main(o: &Options, bins: &Bins, vc: Option<&OnVcluster>) -> Result<()> {
    if !o.compare {
        run_once(o, bins, &o.balance, "", true, vc)?;
        eprintln!(
            "run-laplace: results in {}/ (steps.jsonl, summary.json, balance.svg, partition.svg, vtk/)",
            o.out.display()
        );
        return Ok(());
    }
    let uniform = run_once(o, bins, "uniform", "uniform-", true, vc)?;
    let monitored = run_once(o, bins, "monitored", "monitored-", true, vc)?;
    let t = |v: &serde_json::Value| -> Result<f64> {
        v["wall_s"].as_f64().context("summary without wall_s")
    };
    let (tu, tm) = (t(&uniform)?, t(&monitored)?);
    let rc = 1.0 - tm / tu;
    let rc_ideal = monitored["rc_ideal"].as_f64();
    if o.json {
        println!(
            "{}",
            serde_json::json!({
                "t_uniform_s": tu,
                "t_monitored_s": tm,
                "rc": rc,
                "rc_ideal": rc_ideal,
            })
        );
    } else {
        println!(
            "\nrun-laplace --compare: uniform {tu:.3} s, monitored {tm:.3} s: RC = 1 - t_monitored/t_uniform = {rc:.3}{}",
            rc_ideal.map_or(String::new(), |r| format!(
                " (RC_ideal {r:.3}; RC/RC_ideal {:.2})",
                rc / r
            ))
        );
    }
    eprintln!(
        "run-laplace: results in {}/ (uniform-* and monitored-*)",
        o.out.display()
    );
    Ok(())
}

/// The check of `xtask ci`: run-laplace with `--backend mpi` (two processes under mpirun,
/// with the load of the machine file) on a shortened run gives, step by step, the thread
/// run's mesh hashes. `bins`: the debug builds (`fem` with MPI, `threads` without).
pub(crate) fn ci_check(
    fem_mpi: &Path,
    fem_threads: &Path,
    drum: &Path,
    vertices: &str,
) -> Result<()> {
    let out = crate::target_dir().join("mpi-cli/run-laplace");
    let options = |backend| Options {
        backend,
        out: out.clone(),
        fem_args: vec!["--target-vertices".into(), vertices.into()],
        ..parse(&[]).expect("the defaults parse")
    };
    let hashes = |o: &Options, tag: &str| mesh_hashes(&o.out.join(format!("{tag}steps.jsonl")));
    std::fs::create_dir_all(&out)?;
    let mpi = options(Backend::Mpi);
    run_once(
        &mpi,
        &Bins {
            fem: fem_mpi.to_path_buf(),
            drum: drum.to_path_buf(),
        },
        "monitored",
        "mpi-",
        false,
        None,
    )?;
    let threads = options(Backend::Threads);
    run_once(
        &threads,
        &Bins {
            fem: fem_threads.to_path_buf(),
            drum: drum.to_path_buf(),
        },
        "monitored",
        "threads-",
        false,
        None,
    )?;
    let (a, b) = (hashes(&mpi, "mpi-")?, hashes(&threads, "threads-")?);
    if a != b || a.is_empty() {
        bail!("run-laplace --backend mpi gave the mesh hashes {a:?}, the thread run {b:?}");
    }
    println!(
        "xtask: run-laplace --backend mpi --target-vertices {vertices} (mpirun -np 2, monitored, \
         with the machine's load): {} steps, mesh hashes = the thread run's (last {})",
        a.len(),
        a.last().map_or("-", String::as_str)
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn defaults_and_pass_through() {
        let o = parse(&args("--target-vertices 2000 --json --svg m.svg")).unwrap();
        assert_eq!(o.machine, "machines/local-2core-hetero.xml");
        assert_eq!(o.balance, "monitored");
        assert_eq!(o.fem_args, args("--target-vertices 2000"));
        assert!(o.json);
        let files = Outputs::new(&o, "");
        assert_eq!(files.svg, PathBuf::from("m.svg"));
        let a = fem_args(&o, "monitored", &files, true, None);
        let joined = a.join(" ");
        assert!(joined.contains("--machine-load"), "{joined}");
        assert!(joined.contains("--svg m.svg"), "{joined}");
        assert!(
            joined.contains("--vtk out/run-laplace/vtk --vtk-last"),
            "{joined}"
        );
        assert!(
            joined.contains("--jsonl out/run-laplace/steps.jsonl"),
            "{joined}"
        );
        let o = parse(&args(
            "--machine machines/bullpen.xml --w-comm 0.1 --load 1:2@3",
        ))
        .unwrap();
        assert_eq!(
            (o.machine.as_str(), o.w_comm.as_str()),
            ("machines/bullpen.xml", "0.1")
        );
        let a = fem_args(&o, "static", &Outputs::new(&o, "x-"), false, None).join(" ");
        assert!(
            !a.contains("--machine-load") && a.contains("--load 1:2@3"),
            "{a}"
        );
        assert!(
            a.contains("--balance static") && !a.contains("--progress"),
            "{a}"
        );
        let o = parse(&args("--no-load")).unwrap();
        let a = fem_args(&o, "monitored", &Outputs::new(&o, ""), true, None).join(" ");
        assert!(!a.contains("load"), "{a}");
    }

    #[test]
    fn vcluster_runs_mpi_on_vcluster_2_with_its_flows() {
        let o = parse(&args("--vcluster --net-load node2:50@3 --w-comm 0.5")).unwrap();
        assert_eq!(o.backend, Backend::Mpi);
        assert_eq!(o.machine, "machines/vcluster-2.xml");
        let files = Outputs::new(&o, "");
        let sink: SocketAddr = "10.213.0.1:4000".parse().unwrap();
        let a = fem_args(&o, "monitored", &files, false, Some(sink)).join(" ");
        assert!(
            a.contains("--net-load node2:50@3 --net-sink 10.213.0.1:4000"),
            "{a}"
        );
        let o = parse(&args("--vcluster --machine machines/vcluster-sites.xml")).unwrap();
        assert_eq!(o.machine, "machines/vcluster-sites.xml");
        let e = parse(&args("--net-load node2")).unwrap_err().to_string();
        assert!(e.contains("--net-load needs --vcluster"), "{e}");
        let e = parse(&args("--vcluster --backend threads"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("leave --backend out"), "{e}");
        let e = parse(&args("--vcluster --hostfile h"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("makes its own hostfile"), "{e}");
    }

    #[test]
    fn ranks_from_drum_check() {
        let t = "m.xml: 3 nodes (1 network, 2 single-processor, 0 SMP), 2 ranks\nmore\n";
        assert_eq!(ranks_of_check(t), Some(2));
        assert_eq!(ranks_of_check("m.xml: 1 node (0 network), 1 rank"), Some(1));
        assert_eq!(ranks_of_check("garbage"), None);
    }

    #[test]
    fn bad_flags_are_named() {
        let e = parse(&args("--ranks 4")).unwrap_err().to_string();
        assert!(e.contains("unknown flag `--ranks`"), "{e}");
        let e = parse(&args("--machine")).unwrap_err().to_string();
        assert!(e.contains("--machine needs a value"), "{e}");
        let e = parse(&args("--balance best")).unwrap_err().to_string();
        assert!(e.contains("expected uniform, static or monitored"), "{e}");
        let e = parse(&args("--no-load --load 1")).unwrap_err().to_string();
        assert!(e.contains("contradict"), "{e}");
        let e = parse(&args("--hostfile h")).unwrap_err().to_string();
        assert!(e.contains("--backend mpi"), "{e}");
        let e = parse(&args("--compare --balance static"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("leave --balance out"), "{e}");
    }
}
