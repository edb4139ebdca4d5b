//! The loop on thread ranks over a fake `/proc` tree: what the agents read is set by the
//! test, so powers, decisions and fallbacks are checked exactly.

use super::*;
use comm::{ThreadComm, ThreadOptions};
use std::path::{Path, PathBuf};

const MACHINE: &str = r#"<machinemodel>
  <node type="NETWORK" nodenum="0" name="host" parent="-1">
    <lbmethod lbm="HSFC" KEEP_CUTS="1"/>
  </node>
  <node type="SINGLE_COMPUTING" nodenum="1" name="c0" parent="0" cpus="0" mflops="100"/>
  <node type="SINGLE_COMPUTING" nodenum="2" name="c1" parent="0" cpus="1" mflops="100"/>
</machinemodel>"#;

/// A fake `/proc` (and empty `/sys`) whose CPUs are always busy (no idle time).
struct Fake {
    dir: PathBuf,
}

impl Fake {
    fn new(tag: &str) -> Fake {
        let dir = std::env::temp_dir().join(format!("drum-loop-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("proc/net")).unwrap();
        std::fs::create_dir_all(dir.join("sys")).unwrap();
        let f = Fake { dir };
        f.write("stat", "cpu0 100 0 0 0 0 0 0 0\ncpu1 100 0 0 0 0 0 0 0\n");
        f.write("meminfo", "MemTotal: 1000 kB\nMemAvailable: 900 kB\n");
        f.write("net/dev", "h\nh\n");
        f
    }

    fn procfs(&self) -> ProcFs {
        ProcFs {
            proc_root: self.dir.join("proc"),
            sys_root: self.dir.join("sys"),
        }
    }

    /// Writes a file atomically (the other rank's agent may be reading it).
    fn write(&self, rel: &str, text: &str) {
        let p = self.dir.join("proc").join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        let tmp = p.with_extension(format!("tmp{:?}", std::thread::current().id()));
        std::fs::write(&tmp, text).unwrap();
        std::fs::rename(tmp, p).unwrap();
    }

    /// Both CPUs busy for `k` more jiffies. Written in place: the agents keep `/proc/stat`
    /// open (the ranks wait at a barrier before they read it again).
    fn busy(&self, k: u64) {
        let j = 100 + 10 * k;
        let text = format!("cpu0 {j} 0 0 0 0 0 0 0\ncpu1 {j} 0 0 0 0 0 0 0\n");
        std::fs::write(self.dir.join("proc/stat"), text).unwrap();
    }

    /// The calling thread's files: `stat` (no ticks) and `schedstat` (run and wait, ns).
    fn thread(&self, run_ns: u64, delay_ns: u64) -> PathBuf {
        let ProcessRef::Thread { pid, tid } = ProcessRef::current_thread() else {
            unreachable!()
        };
        let rel = format!("{pid}/task/{tid}");
        self.write(
            &format!("{rel}/stat"),
            &format!("{tid} (rank) R 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0\n"),
        );
        self.write(
            &format!("{rel}/schedstat"),
            &format!("{run_ns} {delay_ns} 1\n"),
        );
        self.dir.join("proc").join(rel)
    }
}

impl Drop for Fake {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn config(fake: &Fake, sizing: Sizing) -> LoopConfig {
    LoopConfig {
        sizing,
        procfs: fake.procfs(),
        period: Duration::from_secs(3600),
        min_window: Duration::from_millis(1),
        probe: None,
        ..LoopConfig::default()
    }
}

/// 1000 points on a line, this rank's half (rank 0 holds all at the first call).
fn points(rank: usize, first: bool) -> Vec<f64> {
    let (lo, hi) = match (first, rank) {
        (true, 0) => (0, 1000),
        (true, _) => (0, 0),
        (false, r) => (r * 500, r * 500 + 500),
    };
    (lo..hi)
        .flat_map(|i| [(i as f64 + 0.5) / 1000.0, 0.5])
        .collect()
}

/// Each rank runs `script(rank, step, fake thread dir)` before each of `steps` rebalances
/// (after sleeping 20 ms, so windows are real) and returns the reports.
fn run(
    tag: &str,
    sizing: Sizing,
    steps: usize,
    script: impl Fn(&Fake, usize, usize, &Path) + Sync,
) -> Vec<Vec<LoopReport>> {
    run_with(tag, sizing, |_| {}, steps, script)
}

/// [`run`] with the configuration changed by `tweak`.
fn run_with(
    tag: &str,
    sizing: Sizing,
    tweak: impl Fn(&mut LoopConfig) + Sync,
    steps: usize,
    script: impl Fn(&Fake, usize, usize, &Path) + Sync,
) -> Vec<Vec<LoopReport>> {
    let fake = Fake::new(tag);
    let machine = Machine::parse_str(MACHINE, "m.xml").unwrap();
    let out = ThreadComm::run(2, &ThreadOptions::default(), |c| {
        let me = Comm::rank(&c);
        let dir = fake.thread(1, 1);
        let mut cfg = config(&fake, sizing);
        tweak(&mut cfg);
        let mut lp = DrumLoop::start(&c, machine.clone(), cfg)?;
        let mut reports = Vec::new();
        for step in 0..steps {
            std::thread::sleep(Duration::from_millis(20));
            if me == 0 {
                fake.busy(step as u64 + 1);
            }
            script(&fake, me, step, &dir);
            c.barrier()?;
            let xy = points(me, step == 0);
            let mut parts = vec![me as u32; xy.len() / 2];
            reports.push(lp.rebalance(&c, Points::new(&xy, 2, None), &mut parts)?);
        }
        lp.stop()?;
        Ok::<_, Error>(reports)
    })
    .unwrap();
    out.into_iter().map(|r| r.unwrap()).collect()
}

fn close(a: f64, b: f64) {
    assert!((a - b).abs() < 1e-9, "{a} vs {b}");
}

#[test]
fn monitored_sizes_follow_the_cpu_share_each_rank_gets() {
    // Rank 1 waits for its CPU as long as it runs (a competing process); rank 0 never waits.
    // Both were runnable 10 ms of each window: rank 0 gets the whole CPU, rank 1 half.
    let reports = run("share", Sizing::Monitored, 3, |fake, me, step, _| {
        let k = step as u64 + 1;
        match me {
            0 => fake.thread(1 + 10_000_000 * k, 1),
            _ => fake.thread(1 + 5_000_000 * k, 1 + 5_000_000 * k),
        };
    });
    for per_rank in &reports {
        let r = &per_rank[0];
        assert_eq!(r.decision.reason, "initial");
        assert!(r.decision.rebalance);
        close(r.targets[0], 2.0 / 3.0);
        close(r.targets[1], 1.0 / 3.0);
        close(r.achieved[0] + r.achieved[1], 1.0);
        assert!((r.achieved[0] - 2.0 / 3.0).abs() < 0.01, "{:?}", r.achieved);
        assert!(r.warnings.is_empty(), "{:?}", r.warnings);
        let m1 = &r.measured[1];
        assert!(m1.evidence);
        close(m1.runnable.unwrap() / m1.util, 2.0);
        // Step 1: the loads are half and half again (the test's points), the sizes 2:1:
        // eff = 0.75 < 0.9, a rebalance for imbalance.
        let r = &per_rank[1];
        assert!(r.decision.rebalance, "{}", r.decision.text);
        assert_eq!(r.decision.reason, "imbalance");
        close(r.decision.eff, 0.75);
        close(r.loads[0], 0.5);
    }
    // Every rank reports the same (but its own times).
    let same = |r: &Vec<LoopReport>| {
        r.iter()
            .map(|x| LoopReport {
                partition_s: 0.0,
                cost: crate::RebalanceCost::default(),
                ..x.clone()
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(same(&reports[0]), same(&reports[1]));
}

#[test]
fn uniform_and_static_keep_their_sizes_and_report_the_measurement() {
    let script = |fake: &Fake, me: usize, step: usize, _: &Path| {
        let k = step as u64 + 1;
        match me {
            0 => fake.thread(1 + 10_000_000 * k, 1),
            _ => fake.thread(1 + 5_000_000 * k, 1 + 5_000_000 * k),
        };
    };
    for sizing in [Sizing::Uniform, Sizing::Static] {
        let reports = run(sizing.name(), sizing, 2, script);
        let r = &reports[0][1];
        assert_eq!(r.sizing, sizing.name());
        close(r.targets[0], 0.5); // equal ratings: static is equal too
        close(r.monitored_sizes[0], 2.0 / 3.0);
        // Half and half against half and half: balanced, kept.
        assert!(!r.decision.rebalance);
        assert_eq!(r.decision.reason, "balanced");
        assert_eq!(r.partition_s, 0.0);
    }
}

#[test]
fn measure_alone_renews_the_sizes_in_use_and_partitions_nothing() {
    // A caller that partitions itself (zoltan-drum) senses between its own partitions: the
    // monitored sizes become the sizes in use under Monitored, stay apart under Static, and
    // every rank sees the same.
    for sizing in [Sizing::Monitored, Sizing::Static] {
        let fake = Fake::new(&format!("sense-{}", sizing.name()));
        let machine = Machine::parse_str(MACHINE, "m.xml").unwrap();
        let out = ThreadComm::run(2, &ThreadOptions::default(), |c| {
            let me = Comm::rank(&c);
            fake.thread(1, 1);
            let mut lp = DrumLoop::start(&c, machine.clone(), config(&fake, sizing))?;
            std::thread::sleep(Duration::from_millis(20));
            if me == 0 {
                fake.busy(1);
            }
            match me {
                0 => fake.thread(1 + 10_000_000, 1),
                _ => fake.thread(1 + 5_000_000, 1 + 5_000_000),
            };
            c.barrier()?;
            let sensed = lp.measure(&c)?;
            let in_use = lp.part_sizes().to_vec();
            lp.stop()?;
            Ok::<_, Error>((sensed, in_use))
        })
        .unwrap();
        let (sensed, in_use) = out[0].as_ref().unwrap();
        assert_eq!(out[1].as_ref().unwrap(), &(sensed.clone(), in_use.clone()));
        assert!(
            sensed.measured_s > 0.0 && sensed.window_s > 0.0,
            "{sensed:?}"
        );
        assert!(sensed.measured[1].evidence);
        close(sensed.monitored_sizes[0], 2.0 / 3.0);
        let expected = match sizing {
            Sizing::Monitored => 2.0 / 3.0,
            _ => 0.5,
        };
        close(in_use[0], expected);
    }
}

#[test]
fn a_failing_agent_a_near_zero_rank_and_an_idle_rank_keep_every_rank_a_part() {
    let reports = run("robust", Sizing::Monitored, 4, |fake, me, step, dir| {
        let k = step as u64 + 1;
        match (me, step) {
            (0, _) => {
                fake.thread(1 + 10_000_000 * k, 1);
            }
            // Step 0: rank 1 had nothing to do (runnable 0.5 ms): no news of its node.
            (_, 0) => {
                fake.thread(500_001, 1);
            }
            // Step 1: its stat file is unreadable.
            (_, 1) => std::fs::remove_file(dir.join("stat")).unwrap(),
            // Step 2: back, but it ran 1 % of the 50 ms it was runnable: floored.
            (_, 2) => {
                fake.thread(1_000_001, 49_000_001);
            }
            _ => {
                fake.thread(6_000_001, 49_000_001 + 5_000_000);
            }
        }
    });
    let r = &reports[0];
    // Step 0: rank 1 without evidence: its node keeps the static observation (equal sizes).
    assert!(!r[0].measured[1].evidence);
    close(r[0].targets[1], 0.5);
    assert!(r[0].warnings.is_empty(), "{:?}", r[0].warnings);
    // Step 1: a warning naming rank 1 and the file; sizes unchanged.
    assert_eq!(r[1].warnings.len(), 1, "{:?}", r[1].warnings);
    let w = &r[1].warnings[0];
    assert!(w.starts_with("rank 1 (node 2 (\"c1\")):"), "{w}");
    assert!(w.contains("/stat: cannot read"), "{w}");
    assert!(
        w.ends_with("its node keeps its previous measurement"),
        "{w}"
    );
    close(r[1].targets[1], 0.5);
    // Step 2: 1 % of the CPU: raised to the 5 % floor, with a warning naming the rank.
    assert_eq!(r[2].warnings.len(), 1, "{:?}", r[2].warnings);
    assert!(
        r[2].warnings[0].contains("(rank 1): measured processing power 1.0%"),
        "{:?}",
        r[2].warnings
    );
    close(r[2].targets[1], 0.05 / 1.05);
    assert!(r[2].targets.iter().all(|&t| t > 0.0));
    // Step 3: 5 ms run of 10 ms runnable: half.
    close(r[3].targets[1], 1.0 / 3.0);
}

/// Rank 1 gets half its CPU in steps 0 and 1, a quarter from step 2 on.
fn shifting_share(fake: &Fake, me: usize, step: usize, _: &Path) {
    let k = step as u64 + 1;
    match me {
        0 => fake.thread(1 + 10_000_000 * k, 1),
        _ => {
            let (run, wait) = (0..k).fold((1u64, 1u64), |(r, w), s| match s {
                0 | 1 => (r + 5_000_000, w + 5_000_000),
                _ => (r + 2_500_000, w + 7_500_000),
            });
            fake.thread(run, wait)
        }
    };
}

#[test]
fn sensing_every_second_point_keeps_the_powers_in_between_and_once_never_renews_them() {
    let every2 = run_with(
        "sense2",
        Sizing::Monitored,
        |c| c.sensing = Sensing::Every(2),
        5,
        shifting_share,
    );
    let r = &every2[0];
    let sensed: Vec<bool> = r.iter().map(|x| x.measured_s > 0.0).collect();
    assert_eq!(sensed, [true, false, true, false, true]);
    close(r[1].monitored_sizes[1], 1.0 / 3.0); // step 0's powers kept
    // Step 2's window covers steps 1 and 2: rank 1 got 2.5 + 5 ms of 10 + 10 ms runnable.
    close(r[2].monitored_sizes[1] / r[2].monitored_sizes[0], 0.375);
    close(r[4].monitored_sizes[1] / r[4].monitored_sizes[0], 0.25);

    let once = run_with(
        "sense1",
        Sizing::Monitored,
        |c| c.sensing = Sensing::Once,
        4,
        shifting_share,
    );
    for x in &once[0] {
        close(x.monitored_sizes[1], 1.0 / 3.0);
    }
    assert!(once[0][1..].iter().all(|x| x.measured_s == 0.0));
}

#[test]
fn always_and_never_override_the_policy_and_keep_its_figures() {
    let script = |fake: &Fake, me: usize, step: usize, _: &Path| {
        let k = step as u64 + 1;
        fake.thread(1 + 10_000_000 * k, 1 + (me as u64) * 10_000_000 * k);
    };
    let always = run_with(
        "always",
        Sizing::Monitored,
        |c| c.rebalance = RebalanceMode::Always,
        3,
        script,
    );
    let never = run_with(
        "never",
        Sizing::Monitored,
        |c| c.rebalance = RebalanceMode::Never,
        3,
        script,
    );
    for (reports, mode) in [(&always[0], "always"), (&never[0], "never")] {
        assert_eq!(reports[0].decision.reason, "initial");
        assert!(reports[0].decision.rebalance);
        for r in &reports[1..] {
            assert_eq!(r.decision.reason, mode);
            assert_eq!(
                r.decision.rebalance,
                mode == "always",
                "{}",
                r.decision.text
            );
            assert!(
                r.decision.text.contains("the policy:"),
                "{}",
                r.decision.text
            );
            assert!(r.decision.eff > 0.0 && r.decision.eff <= 1.0);
        }
    }
    assert!(never[0][1..].iter().all(|r| r.partition_s == 0.0));
    assert!(always[0][1..].iter().all(|r| r.partition_s > 0.0));
    // The cost's phases follow each other inside the rebalance point.
    for r in always[0].iter().chain(&never[0]) {
        let c = r.cost;
        assert_eq!(c.partition_s, r.partition_s);
        assert!(c.window_s >= 0.0 && c.exchange_s >= 0.0 && c.decision_s >= 0.0);
        let sum = c.window_s + c.exchange_s + c.decision_s + c.partition_s;
        assert!(sum <= c.total_s + 1e-9, "{c:?}");
    }
}

#[test]
fn rebalance_modes_and_sensing_periods_parse_and_name_bad_values() {
    assert_eq!("always".parse::<RebalanceMode>(), Ok(RebalanceMode::Always));
    assert_eq!("never".parse::<RebalanceMode>(), Ok(RebalanceMode::Never));
    assert_eq!("policy".parse::<RebalanceMode>(), Ok(RebalanceMode::Policy));
    assert!(
        "sometimes"
            .parse::<RebalanceMode>()
            .unwrap_err()
            .contains("sometimes")
    );
    assert_eq!("20".parse::<Sensing>(), Ok(Sensing::Every(20)));
    assert_eq!("once".parse::<Sensing>(), Ok(Sensing::Once));
    assert!("0".parse::<Sensing>().unwrap_err().contains(">= 1"));
    assert!("x".parse::<Sensing>().is_err());
    assert_eq!(RebalanceMode::Policy.forced(), None);
    assert_eq!(RebalanceMode::Always.forced(), Some(true));
    assert_eq!(RebalanceMode::Never.forced(), Some(false));
    let every3 = Sensing::Every(3);
    assert!(every3.due(false, 1) && !every3.due(true, 2) && every3.due(true, 3));
    assert!(Sensing::Once.due(false, 5) && !Sensing::Once.due(true, 100));
}

/// Both ranks run 10 ms per window; rank 1 also waits 10 ms for its CPU (a competing
/// process): the same CPU time, half the speed.
fn half_speed(fake: &Fake, me: usize, step: usize, _: &Path) {
    let k = step as u64 + 1;
    match me {
        0 => fake.thread(1 + 10_000_000 * k, 1),
        _ => fake.thread(1 + 10_000_000 * k, 1 + 10_000_000 * k),
    };
}

#[test]
fn measured_capacity_charges_the_time_a_rank_waited_for_its_cpu() {
    let reports = run_with(
        "measured",
        Sizing::Monitored,
        |c| c.power.model = PowerModel::Measured,
        3,
        half_speed,
    );
    for per_rank in &reports {
        // Point 0: nothing was computed before it, so no rank has measured work yet.
        let r = &per_rank[0];
        assert!(
            r.warnings.iter().any(|w| w.contains("no measured work")),
            "{:?}",
            r.warnings
        );
        // Point 1: 500 elements each (what each held after point 0) in 10 and 20 ms: work ÷
        // CPU seconds would say equal; work ÷ runnable seconds says 2:1. (Later points count
        // the work of the partition made here, which this test's ranks do not migrate to.)
        let r = &per_rank[1];
        close(r.monitored_sizes[0], 2.0 / 3.0);
        close(r.monitored_sizes[1], 1.0 / 3.0);
    }
}

#[test]
fn homogeneous_balancing_weighs_the_objects_by_their_ranks_time() {
    let reports = run_with(
        "homogeneous",
        Sizing::Uniform,
        |c| c.load = LoadMeasure::Time,
        3,
        half_speed,
    );
    for per_rank in &reports {
        // Point 0: no time measured yet, the work is the load.
        close(per_rank[0].loads[0], 1.0);
        // Point 1: 500 elements each, in 10 and 20 ms: loads 1/3 and 2/3 in seconds
        // against equal parts; eff = 0.5 / (2/3), a rebalance into equal times.
        let r = &per_rank[1];
        close(r.targets[0], 0.5);
        close(r.loads[0], 1.0 / 3.0);
        close(r.decision.eff, 0.75);
        assert!(r.decision.rebalance);
        // Equal times within the level's tolerance (the default 10 %).
        assert!((r.achieved[0] - 0.5).abs() < 0.05, "{:?}", r.achieved);
    }
}

/// The window measured at a point starts where the previous rebalance ended, not at its cut:
/// the partitioner's own time (here a flat HSFC of 400,000 points on rank 0) is not in the
/// next window's seconds, which Watts et al.'s capacity divides the work by.
#[test]
fn the_next_window_starts_after_the_rebalance() {
    let fake = Fake::new("restart");
    let machine = Machine::parse_str(MACHINE, "m.xml").unwrap();
    let out = ThreadComm::run(2, &ThreadOptions::default(), |c| {
        let me = Comm::rank(&c);
        fake.thread(1, 1);
        let mut lp = DrumLoop::start(&c, machine.clone(), config(&fake, Sizing::Monitored))?;
        let n = if me == 0 { 400_000 } else { 0 };
        let xy: Vec<f64> = (0..n)
            .flat_map(|i| [(i as f64 * 0.618_034) % 1.0, (i as f64 + 0.5) / n as f64])
            .collect();
        let mut parts = vec![me as u32; n];
        let first = lp.rebalance(&c, Points::new(&xy, 2, None), &mut parts)?;
        let returned = Instant::now();
        std::thread::sleep(Duration::from_millis(5));
        c.barrier()?;
        let between = returned.elapsed().as_secs_f64();
        let second = lp.rebalance(&c, Points::new(&[], 2, None), &mut [])?;
        lp.stop()?;
        Ok::<_, Error>((first.partition_s, between, second))
    })
    .unwrap();
    for r in out {
        let (partition_s, between, second) = r.unwrap();
        let window = second.measured[0].seconds.max(second.measured[1].seconds);
        // Without the restart the window would hold the partition too: at least
        // `partition_s` more than the time between the calls.
        assert!(
            window < between + 0.5 * partition_s,
            "window {window} s, between the calls {between} s, partitioner {partition_s} s"
        );
        assert!(second.window_s < between + 0.5 * partition_s);
    }
}

/// One rank's point: the report, the new ranks (`None`: kept), whether the points were made.
type PointOutcome = (LoopReport, Option<Vec<u32>>, bool);

/// How [`run_parts`] calls a rebalance point.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Call {
    /// [`DrumLoop::rebalance`] on points made beforehand.
    Eager,
    /// [`DrumLoop::rebalance_lazy`].
    Lazy,
    /// [`DrumLoop::point_figures`], the application's own `allgatherv` of them, then
    /// [`DrumLoop::rebalance_lazy_gathered`].
    Gathered,
}

/// [`run`]'s loop with the "share" script (rank 1 gets half a CPU), each point made as `call`
/// says: per rank and step, the report, the new ranks (`None`: kept) and whether the points
/// were made.
fn run_parts(tag: &str, sizing: Sizing, steps: usize, call: Call) -> Vec<Vec<PointOutcome>> {
    let fake = Fake::new(tag);
    let machine = Machine::parse_str(MACHINE, "m.xml").unwrap();
    let out = ThreadComm::run(2, &ThreadOptions::default(), |c| {
        let me = Comm::rank(&c);
        fake.thread(1, 1);
        let mut lp = DrumLoop::start(&c, machine.clone(), config(&fake, sizing))?;
        let mut out = Vec::new();
        for step in 0..steps {
            std::thread::sleep(Duration::from_millis(20));
            if me == 0 {
                fake.busy(step as u64 + 1);
            }
            let k = step as u64 + 1;
            match me {
                0 => fake.thread(1 + 10_000_000 * k, 1),
                _ => fake.thread(1 + 5_000_000 * k, 1 + 5_000_000 * k),
            };
            c.barrier()?;
            let xy = points(me, step == 0);
            let n = xy.len() / 2;
            let mut made = false;
            let fill = |coords: &mut Vec<f64>, parts: &mut Vec<u32>| {
                made = true;
                coords.extend_from_slice(&xy);
                parts.resize(n, me as u32);
                2
            };
            let (r, parts) = match call {
                Call::Eager => {
                    let mut parts = vec![me as u32; n];
                    let r = lp.rebalance(&c, Points::new(&xy, 2, None), &mut parts)?;
                    made = true;
                    let parts = r.decision.rebalance.then_some(parts);
                    (r, parts)
                }
                Call::Lazy => lp.rebalance_lazy(&c, n, None, fill)?,
                Call::Gathered => {
                    let mine = lp.point_figures(None, n);
                    let all = c.allgatherv_bytes(mine.bytes())?;
                    let all: Vec<&[u8]> = all.iter().collect();
                    lp.rebalance_lazy_gathered(&c, mine, &all, n, None, fill)?
                }
            };
            out.push((r, parts, made));
        }
        lp.stop()?;
        Ok::<_, Error>(out)
    })
    .unwrap();
    out.into_iter().map(|r| r.unwrap()).collect()
}

/// Lazy points, and lazy points on figures the application gathered, decide and partition
/// as the eager ones do, and make the points only to repartition.
#[test]
fn lazy_points_give_the_same_decisions_and_parts_and_are_made_only_to_repartition() {
    for sizing in [Sizing::Monitored, Sizing::Uniform] {
        let eager = run_parts(&format!("eager-{}", sizing.name()), sizing, 3, Call::Eager);
        for call in [Call::Lazy, Call::Gathered] {
            let tag = format!("{call:?}-{}", sizing.name()).to_lowercase();
            let lazy = run_parts(&tag, sizing, 3, call);
            let mut kept = 0;
            for (e, l) in eager.iter().zip(&lazy) {
                for ((re, pe, _), (rl, pl, made)) in e.iter().zip(l) {
                    assert_eq!(re.decision.rebalance, rl.decision.rebalance, "{tag}");
                    assert_eq!(re.decision.reason, rl.decision.reason, "{tag}");
                    assert_eq!(re.targets, rl.targets, "{tag}");
                    assert_eq!(pe, pl, "{tag}: {}", rl.decision.text);
                    assert_eq!(*made, rl.decision.rebalance, "{tag}: {}", rl.decision.text);
                    kept += usize::from(!rl.decision.rebalance);
                }
            }
            // The initial point repartitions; uniform sizes keep the even split after it.
            assert!(lazy.iter().all(|r| r[0].0.decision.rebalance), "{tag}");
            if sizing == Sizing::Uniform {
                assert!(kept >= 2, "{tag}: uniform kept {kept} points");
            }
        }
    }
}

/// Gathered figures of another count than the ranks are an error naming them, and so is a
/// garbled fixed part (time and load).
#[test]
fn gathered_figures_of_the_wrong_count_or_garbled_are_an_error() {
    let fake = Fake::new("gathered-bad");
    let machine = Machine::parse_str(MACHINE, "m.xml").unwrap();
    let out = ThreadComm::run(2, &ThreadOptions::default(), |c| {
        let mut lp = DrumLoop::start(&c, machine.clone(), config(&fake, Sizing::Uniform))?;
        let never = |_: &mut Vec<f64>, _: &mut Vec<u32>| -> usize { unreachable!("no points") };
        let mine = lp.point_figures(None, 0);
        let count = lp.rebalance_lazy_gathered(&c, mine, &[&[]], 0, None, never);
        let mine = lp.point_figures(None, 0);
        let short = [0u8; 3];
        let garbled = lp.rebalance_lazy_gathered(&c, mine, &[&short, &short], 0, None, never);
        lp.stop()?;
        let text = |r: Result<(LoopReport, Option<Vec<u32>>), Error>| {
            r.map(|_| ()).map_err(|e| e.to_string()).unwrap_err()
        };
        Ok::<_, Error>((text(count), text(garbled)))
    })
    .unwrap();
    for r in out {
        let (count, garbled) = r.unwrap();
        assert!(
            count.contains("a rebalance point's gathered figures has 1 entries, expected 2"),
            "{count}"
        );
        assert!(
            garbled.contains("a rank's rebalance-point figures"),
            "{garbled}"
        );
    }
}

#[test]
fn lazy_points_of_the_wrong_length_are_an_error() {
    // One rank: its first point repartitions, so the points are made.
    let fake = Fake::new("lazy-len");
    let one = MACHINE.replace(
        r#"<node type="SINGLE_COMPUTING" nodenum="2" name="c1" parent="0" cpus="1" mflops="100"/>"#,
        "",
    );
    let one = Machine::parse_str(&one, "m1.xml").unwrap();
    let out = ThreadComm::run(1, &ThreadOptions::default(), |c| {
        let one = one.clone();
        let mut lp = DrumLoop::start(&c, one, config(&fake, Sizing::Uniform))?;
        let r = lp.rebalance_lazy(&c, 10, None, |coords, parts| {
            coords.resize(20, 0.5);
            parts.resize(9, 0);
            2
        });
        lp.stop()?;
        Ok::<_, Error>(r.map(|_| ()).map_err(|e| e.to_string()))
    })
    .unwrap();
    let msg = out[0].as_ref().unwrap().as_ref().unwrap_err().clone();
    assert!(
        msg.contains("current ranks has 9 entries, expected 10"),
        "{msg}"
    );
}

#[test]
fn the_gain_horizon_sums_the_growing_steps_left_and_delta_grows_with_the_load() {
    use super::{delta_per_weight, gain_horizon};
    // Lan et al.: the next step alone.
    assert_eq!(gain_horizon(None, 2.0), 1.0);
    // The last step: the next one alone; two more after it, the load doubling: 1 + 2 + 4.
    assert_eq!(gain_horizon(Some(0), 2.0), 1.0);
    assert_eq!(gain_horizon(Some(2), 2.0), 7.0);
    // A shrinking or unknown growth counts each step as the next.
    assert_eq!(gain_horizon(Some(3), 0.5), 4.0);
    assert_eq!(gain_horizon(Some(3), f64::NAN), 4.0);
    // A repartition of 10^5 weight costing 12 ms over a fixed 2 ms: 0.1 µs per weight.
    let b = delta_per_weight(0.012, 0.002, 1e5).unwrap();
    assert!((b - 1e-7).abs() < 1e-15, "{b}");
    // Cheaper than the fixed part: nothing per weight; figures that say nothing: none.
    assert_eq!(delta_per_weight(0.001, 0.002, 1e5), Some(0.0));
    assert_eq!(delta_per_weight(f64::NAN, 0.0, 1e5), None);
    assert_eq!(delta_per_weight(0.01, 0.0, 0.0), None);
}
