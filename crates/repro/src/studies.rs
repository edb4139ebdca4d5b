//! The six studies: which configurations each runs, measured on this host and simulated at
//! cluster size.

use crate::measured::HostRun;
use crate::sim::{Net, NodeSpec, SimConfig, SimLoad};
use drum_loop::rebalance::Policy;
use drum_loop::{RebalanceMode, Sensing, Sizing};

/// How big a reproduction is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scale {
    /// One small configuration per study (the end-to-end test).
    Tiny,
    /// Every study, one repeat per measured configuration.
    Quick,
    /// Every study at PHAML's size, medians of 3.
    Full,
}

impl Scale {
    /// The mesh size (vertices) of the scale.
    pub fn target(self) -> usize {
        match self {
            Scale::Tiny => 4_000,
            Scale::Quick | Scale::Full => fem_laplace::PHAML_TARGET_VERTICES,
        }
    }
    /// Repeats of each measured configuration at this scale.
    pub fn repeats(self) -> usize {
        match self {
            Scale::Tiny | Scale::Quick => 1,
            Scale::Full => 3,
        }
    }
}

/// The study keys, in report order.
pub const STUDIES: [&str; 6] = ["exp1", "exp2", "exp3", "exp4", "sensing", "gain_cost"];

/// One run of a study: a configuration and a way to balance it.
#[derive(Debug, Clone)]
pub struct Case {
    pub study: &'static str,
    /// The configuration (machine and load scenario), e.g. `2F+2S`.
    pub config: String,
    /// The balancing variant, e.g. `uniform`, `DRUM w_comm=0.1`, `sensing 4`.
    pub variant: String,
    /// `uniform`, `static` or `monitored`.
    pub sizing: Sizing,
    pub w_comm: f64,
    pub loads: Vec<SimLoad>,
    pub rebalance: RebalanceMode,
    pub sensing: Sensing,
    pub how: How,
}

/// Measured here, or simulated on these nodes.
#[derive(Debug, Clone)]
pub enum How {
    Measured { ranks: usize },
    Simulated { nodes: Vec<NodeSpec> },
}

impl Case {
    pub fn mode(&self) -> &'static str {
        match self.how {
            How::Measured { .. } => "measured",
            How::Simulated { .. } => "simulated",
        }
    }

    /// The simulator's configuration of this case (a measured one: the host's machine).
    pub fn sim(&self, host_mflops: f64) -> SimConfig {
        let (nodes, net) = match &self.how {
            How::Measured { ranks } => (
                (0..*ranks)
                    .map(|r| NodeSpec::new(&format!("core{r}"), host_mflops, 1, 1))
                    .collect(),
                Net::Host,
            ),
            How::Simulated { nodes } => (
                nodes.clone(),
                Net::Switched {
                    alpha: BULLPEN_ALPHA,
                    bytes_per_s: BULLPEN_MBIT * 1e6 / 8.0,
                },
            ),
        };
        SimConfig {
            nodes,
            net,
            sizing: self.sizing,
            w_comm: self.w_comm,
            loads: self.loads.clone(),
            rebalance: self.rebalance,
            sensing: self.sensing,
            policy: policy(),
            min_window: drum_loop::LoopConfig::default().min_window.as_secs_f64(),
        }
    }

    /// `--rebalance`'s form of the mode.
    pub fn rebalance_name(&self) -> &'static str {
        match self.rebalance {
            RebalanceMode::Policy => "policy",
            RebalanceMode::Always => "always",
            RebalanceMode::Never => "never",
        }
    }

    /// `--sensing`'s form of the period.
    pub fn sensing_name(&self) -> String {
        match self.sensing {
            Sensing::Every(n) => n.to_string(),
            Sensing::Once => "once".into(),
        }
    }

    /// The measured run's settings.
    pub fn host_run(&self) -> Option<HostRun> {
        let How::Measured { ranks } = self.how else {
            return None;
        };
        Some(HostRun {
            ranks,
            balance: self.sizing.name(),
            w_comm: self.w_comm,
            loads: self.loads.clone(),
            rebalance: self.rebalance_name(),
            sensing: self.sensing_name(),
            extra: Vec::new(),
        })
    }
}

/// `fem-laplace`'s default policy (eff_min 0.95, γ 2, drift 10 %).
pub fn policy() -> Policy {
    Policy {
        eff_min: 0.95,
        ..Policy::default()
    }
}

/// Bullpen's switch: fast Ethernet (DRUM 2005 §4).
pub const BULLPEN_MBIT: f64 = 100.0;
/// Its latency per message: an assumption (typical of MPI over fast Ethernet then), not
/// from the paper.
pub const BULLPEN_ALPHA: f64 = 100e-6;

/// Bullpen's fast nodes (450 MHz, 67.5 MFLOPS per CPU, `machines/bullpen.xml`) with CPUs.
const FAST: [(&str, usize); 5] = [
    ("bullpen", 2),
    ("rivera", 4),
    ("wetteland", 4),
    ("stanton", 4),
    ("nelson", 4),
];
/// Its slow uniprocessors (300/333 MHz) and their ratings.
const SLOW: [(&str, f64); 6] = [
    ("mendoza", 50.0),
    ("lloyd", 50.0),
    ("hernandez", 45.0),
    ("boehringer", 45.0),
    ("gordon", 45.0),
    ("karsay", 45.0),
];
const FAST_MFLOPS: f64 = 67.5;

/// `procs` processes on each of the 4-CPU fast nodes listed (from wetteland on), and one on
/// each of `slow` slow nodes.
fn bullpen(fast: &[usize], slow: usize) -> Vec<NodeSpec> {
    let quads = FAST.iter().filter(|f| f.1 == 4);
    let mut v: Vec<NodeSpec> = quads
        .zip(fast)
        .map(|((name, cpus), &p)| NodeSpec::new(name, FAST_MFLOPS, *cpus, p))
        .collect();
    if fast.len() > 4 {
        let (name, cpus) = FAST[0];
        v.push(NodeSpec::new(name, FAST_MFLOPS, cpus, fast[4].min(cpus)));
    }
    v.extend(
        SLOW.iter()
            .take(slow)
            .map(|(name, mf)| NodeSpec::new(name, *mf, 1, 1)),
    );
    v
}

/// `#total [#fast(#procs) + #slow(1)]`, DRUM 2005 §4.2's notation.
fn label(fast: &[usize], slow: usize) -> String {
    let total: usize = fast.iter().sum::<usize>() + slow;
    let mut groups: Vec<(usize, usize)> = Vec::new(); // (processes, nodes)
    for &p in fast {
        match groups.iter_mut().find(|g| g.0 == p) {
            Some(g) => g.1 += 1,
            None => groups.push((p, 1)),
        }
    }
    let fast: Vec<String> = groups.iter().map(|(p, n)| format!("{n}({p})")).collect();
    let mut s = format!("{total} [{}", fast.join(" + "));
    if slow > 0 {
        s += &format!(" + {slow}(1)");
    }
    s + "]"
}

fn case(
    study: &'static str,
    config: &str,
    variant: &str,
    sizing: Sizing,
    w_comm: f64,
    how: &How,
) -> Case {
    Case {
        study,
        config: config.into(),
        variant: variant.into(),
        sizing,
        w_comm,
        loads: Vec::new(),
        // PHAML repartitions after every refinement in the DRUM experiments; the policy is
        // the gain/cost study's subject.
        rebalance: RebalanceMode::Always,
        sensing: Sensing::Every(1),
        how: how.clone(),
    }
}

fn with_loads(mut c: Case, loads: &[SimLoad]) -> Case {
    c.loads = loads.to_vec();
    c
}

/// `procs` competing processes on `rank`'s core from step `from` to `until`.
pub(crate) fn load(rank: usize, procs: usize, from: usize, until: Option<usize>) -> SimLoad {
    SimLoad {
        rank,
        procs,
        from,
        until,
    }
}

/// Uniform, then DRUM with each `w_comm`.
fn sweep(study: &'static str, config: &str, how: &How, loads: &[SimLoad], ws: &[f64]) -> Vec<Case> {
    let mut v = vec![with_loads(
        case(study, config, "uniform", Sizing::Uniform, 0.0, how),
        loads,
    )];
    for &w in ws {
        v.push(with_loads(
            case(
                study,
                config,
                &format!("DRUM w_comm={w}"),
                Sizing::Monitored,
                w,
                how,
            ),
            loads,
        ));
    }
    v
}

/// Every case of a reproduction at `scale` on a host of `cores` cores, study by study.
pub fn cases(scale: Scale, cores: usize, steps: usize) -> Vec<Case> {
    let mut v = exp1_cases(scale, cores);
    v.extend(exp2_cases(scale));
    v.extend(exp3_cases(scale));
    v.extend(exp4_cases(scale));
    v.extend(sensing_cases(scale, steps));
    v.extend(gain_cost_cases(steps));
    v
}

/// A simulated cluster of Bullpen nodes: `fast` processes on each fast node, `slow` slow nodes.
fn sim(fast: &[usize], slow: usize) -> How {
    How::Simulated {
        nodes: bullpen(fast, slow),
    }
}

/// The cases of experiment 1 ([`cases`]).
fn exp1_cases(scale: Scale, cores: usize) -> Vec<Case> {
    let tiny = scale == Scale::Tiny;
    let host2 = How::Measured { ranks: 2 };
    let mut v = Vec::new();
    // Exp. 1: one process per node, fast and slow; here a core shared with a competing
    // process is the slow node.
    let ws1: &[f64] = if tiny { &[0.0] } else { &[0.0, 0.1, 0.25] };
    v.extend(sweep("exp1", "2 cores, dedicated", &host2, &[], ws1));
    if !tiny {
        v.extend(sweep(
            "exp1",
            "2 cores, core 1 shared with 1 process",
            &host2,
            &[load(1, 1, 0, None)],
            ws1,
        ));
        if cores >= 4 {
            let host4 = How::Measured { ranks: 4 };
            v.extend(sweep(
                "exp1",
                "4 cores, cores 2-3 shared with 1 process",
                &host4,
                &[load(2, 1, 0, None), load(3, 1, 0, None)],
                ws1,
            ));
        }
    }
    let exp1: &[(usize, usize)] = if tiny {
        &[(1, 1)]
    } else {
        &[(2, 0), (4, 0), (1, 1), (2, 2), (3, 3), (4, 4), (5, 6)]
    };
    for &(f, s) in exp1 {
        let name = format!("{f}F+{s}S");
        v.extend(sweep("exp1", &name, &sim(&vec![1; f], s), &[], ws1));
    }
    v
}

/// The cases of experiment 2 ([`cases`]).
fn exp2_cases(scale: Scale) -> Vec<Case> {
    let tiny = scale == Scale::Tiny;
    let host2 = How::Measured { ranks: 2 };
    let mut v = Vec::new();
    // Exp. 2: w_comm from 0 to 1, SMP nodes running several processes.
    let ws2: &[f64] = if tiny {
        &[0.0, 1.0]
    } else {
        &[0.0, 0.1, 0.25, 0.5, 0.75, 1.0]
    };
    let exp2: &[(&[usize], usize)] = if tiny {
        &[(&[2], 1)]
    } else {
        &[
            (&[4, 4], 0),
            (&[4, 4, 4, 4], 0),
            (&[4, 4], 2),
            (&[4, 4], 4),
            (&[4, 4], 6),
            (&[4, 4, 4, 4], 6),
            (&[4, 4, 4, 4, 2], 6),
        ]
    };
    for &(f, s) in exp2 {
        v.extend(sweep("exp2", &label(f, s), &sim(f, s), &[], ws2));
    }
    if !tiny {
        v.extend(sweep(
            "exp2",
            "2 cores, core 1 shared with 1 process",
            &host2,
            &[load(1, 1, 0, None)],
            ws2,
        ));
    }
    v
}

/// The cases of experiment 3 ([`cases`]).
fn exp3_cases(scale: Scale) -> Vec<Case> {
    let tiny = scale == Scale::Tiny;
    let host2 = How::Measured { ranks: 2 };
    let mut v = Vec::new();
    // Exp. 3: RC against H_cpu: four fast Bullpen nodes and four nodes h times slower (Bullpen's
    // own slow nodes are h = 1.35 and 1.5; the others are larger spreads of the same tree);
    // here 0 to 3 competing processes on core 1.
    let spreads: &[f64] = if tiny {
        &[1.5]
    } else {
        &[1.0, 1.25, 1.5, 2.0, 3.0, 4.0]
    };
    for &h in spreads {
        let mut nodes = bullpen(&[1, 1, 1, 1], 0);
        nodes.extend((0..4).map(|i| NodeSpec::new(&format!("slow{i}"), FAST_MFLOPS / h, 1, 1)));
        v.extend(sweep(
            "exp3",
            &format!("4F+4S, slow = fast/{h}"),
            &How::Simulated { nodes },
            &[],
            &[0.0],
        ));
    }
    let extra: &[usize] = if tiny { &[2] } else { &[0, 1, 2, 3] };
    for &k in extra {
        let loads: Vec<SimLoad> = (k > 0).then(|| load(1, k, 0, None)).into_iter().collect();
        v.extend(sweep(
            "exp3",
            &format!("2 cores, core 1 shared with {k} processes"),
            &host2,
            &loads,
            &[0.0],
        ));
    }
    v
}

/// The cases of experiment 4 ([`cases`]).
fn exp4_cases(scale: Scale) -> Vec<Case> {
    let tiny = scale == Scale::Tiny;
    let host2 = How::Measured { ranks: 2 };
    let mut v = Vec::new();
    // Exp. 4: two compute-bound processes on the highest-rank node.
    let variants = |study, config: &str, how: &How, loads: &[SimLoad]| {
        vec![
            with_loads(
                case(study, config, "uniform", Sizing::Uniform, 0.0, how),
                loads,
            ),
            with_loads(
                case(study, config, "static (ratings)", Sizing::Static, 0.0, how),
                loads,
            ),
            with_loads(
                case(study, config, "DRUM monitored", Sizing::Monitored, 0.0, how),
                loads,
            ),
        ]
    };
    v.extend(variants(
        "exp4",
        "2 cores (homogeneous), 2 processes on core 1",
        &host2,
        &[load(1, 2, 0, None)],
    ));
    let exp4: &[(&str, &[usize], usize)] = if tiny {
        &[("1F+1S", &[1], 1)]
    } else {
        &[
            ("8 [2(4)] (homogeneous)", &[4, 4], 0),
            ("16 [4(4)] (homogeneous)", &[4, 4, 4, 4], 0),
            ("2F+2S", &[1, 1], 2),
            ("10 [2(4) + 2(1)]", &[4, 4], 2),
        ]
    };
    for &(name, f, s) in exp4 {
        let nodes = bullpen(f, s);
        let last = nodes.iter().map(|n| n.procs).sum::<usize>() - 1;
        v.extend(variants(
            "exp4",
            &format!("{name}, 2 processes on the last node"),
            &How::Simulated { nodes },
            &[load(last, 2, 0, None)],
        ));
    }
    v
}

/// The cases of the sensing-period study ([`cases`]).
fn sensing_cases(scale: Scale, steps: usize) -> Vec<Case> {
    let tiny = scale == Scale::Tiny;
    let host2 = How::Measured { ranks: 2 };
    let mut v = Vec::new();
    // Sinha–Parashar: the sensing period under a load that comes and goes.
    // The last steps take most of the time: the load comes five steps before the end on one
    // node and moves to another for the last three.
    let on = steps.saturating_sub(5).max(1);
    let periods: &[Sensing] = if tiny {
        &[Sensing::Every(1), Sensing::Once]
    } else {
        &[
            Sensing::Every(1),
            Sensing::Every(2),
            Sensing::Every(4),
            Sensing::Every(8),
            Sensing::Once,
        ]
    };
    let sensing = |config: &str, how: &How, loads: &[SimLoad]| {
        let mut c = vec![with_loads(
            case("sensing", config, "uniform", Sizing::Uniform, 0.0, how),
            loads,
        )];
        for &p in periods {
            let name = match p {
                Sensing::Every(n) => format!("sensing every {n}"),
                Sensing::Once => "sensing once".into(),
            };
            let mut x = with_loads(
                case("sensing", config, &name, Sizing::Monitored, 0.0, how),
                loads,
            );
            x.sensing = p;
            c.push(x);
        }
        c
    };
    let switch = steps.saturating_sub(3).max(on + 1);
    v.extend(sensing(
        &format!(
            "2 cores, 2 processes on core 1 in steps {on}-{}, then on core 0",
            switch - 1
        ),
        &host2,
        &[load(1, 2, on, Some(switch)), load(0, 2, switch, None)],
    ));
    let nodes = bullpen(&[4, 4], 2);
    let last = nodes.iter().map(|n| n.procs).sum::<usize>() - 1;
    v.extend(sensing(
        &format!(
            "10 [2(4) + 2(1)], 2 processes on the last node in steps {on}-{}, then on rank 0's",
            switch - 1
        ),
        &How::Simulated { nodes },
        &[load(last, 2, on, Some(switch)), load(0, 2, switch, None)],
    ));
    v
}

/// The cases of the gain/cost study ([`cases`]).
fn gain_cost_cases(steps: usize) -> Vec<Case> {
    let host2 = How::Measured { ranks: 2 };
    let mut v = Vec::new();
    // The load comes five steps before the end, as in the sensing study.
    let on = steps.saturating_sub(5).max(1);
    // Lan–Taylor–Bryan: the gain > γ·cost decision against always and never.
    let modes = [
        ("policy (gain > 2 cost)", RebalanceMode::Policy),
        ("always rebalance", RebalanceMode::Always),
        ("never rebalance", RebalanceMode::Never),
    ];
    let gain = |config: &str, how: &How, loads: &[SimLoad]| {
        modes
            .iter()
            .map(|&(name, m)| {
                let mut c = with_loads(
                    case("gain_cost", config, name, Sizing::Monitored, 0.0, how),
                    loads,
                );
                c.rebalance = m;
                c
            })
            .collect::<Vec<_>>()
    };
    v.extend(gain(
        &format!("2 cores, 1 process on core 1 from step {on}"),
        &host2,
        &[load(1, 1, on, None)],
    ));
    v.extend(gain(
        &format!("3F+3S, 2 processes on the last node from step {on}"),
        &How::Simulated {
            nodes: bullpen(&[1, 1, 1], 3),
        },
        &[load(5, 2, on, None)],
    ));
    v
}
