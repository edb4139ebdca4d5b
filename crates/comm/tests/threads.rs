//! The conformance suite under `ThreadComm` with 1, 2, 3 and 4 ranks, and the thread backend's
//! own failure and option handling.

use comm::conformance;
use comm::{Comm, CommError, ReduceOp, ThreadComm, ThreadOptions};
use std::time::{Duration, Instant};

macro_rules! conformance_tests {
    ($($name:ident),* $(,)?) => {$(
        #[test]
        fn $name() {
            for n in 1..=4 {
                conformance::check_on_threads(n, stringify!($name), conformance::$name::<ThreadComm>);
            }
        }
    )*};
}

conformance_tests!(
    rank_and_size,
    barrier,
    allreduce_f64_exact,
    allreduce_u64,
    allreduce_deterministic,
    allgather_fixed,
    allgatherv,
    gatherv_and_broadcast,
    alltoallv_bytes,
    alltoallv_large_f64,
    exchange_split_phase,
    split_by_parity,
    split_by_key,
    split_node,
    reduce_trait,
    length_mismatch,
    op_mismatch,
    root_mismatch,
    link_model,
    rank_order_sum,
);

/// Every check of the shared list has a test above (a check added to the list but not here
/// would otherwise run only under MPI).
#[test]
fn every_listed_check_runs_here() {
    let here = include_str!("threads.rs");
    for (name, _) in conformance::checks::<ThreadComm>() {
        assert!(
            here.contains(&format!("    {name},\n")),
            "conformance check {name} has no thread test"
        );
    }
}

/// The whole list in one run, as the MPI driver runs it (checks share one communicator).
#[test]
fn whole_suite_in_one_run() {
    for n in [1, 3] {
        let results = ThreadComm::run(n, &ThreadOptions::default(), |c| {
            for (name, check) in conformance::checks::<ThreadComm>() {
                check(&c).map_err(|e| format!("{name}: {e}"))?;
            }
            Ok::<_, String>(())
        })
        .unwrap();
        assert!(results.iter().all(Result::is_ok), "{results:?}");
    }
}

/// Waits at most this long for a run that must fail quickly (a hang fails the test instead of
/// blocking `cargo test`).
fn within<R: Send + 'static>(secs: u64, f: impl FnOnce() -> R + Send + 'static) -> R {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(Duration::from_secs(secs))
        .expect("the run hung")
}

#[test]
fn rank_panicking_mid_collective_fails_the_others() {
    for n in [2, 3, 4] {
        let (run, seen) = within(30, move || {
            let seen = std::sync::Mutex::new(Vec::new());
            let run = ThreadComm::run(n, &ThreadOptions::default(), |c| {
                let mut x = [1.0];
                c.allreduce_f64(ReduceOp::Sum, &mut x).unwrap();
                if c.rank() == 1 {
                    // Others are already waiting in the barrier below.
                    std::thread::sleep(Duration::from_millis(50));
                    panic!("rank one gives up");
                }
                let e = c.barrier().expect_err("barrier must fail");
                seen.lock().unwrap().push((c.rank(), e.to_string()));
                // And every later collective fails at once.
                assert!(c.allreduce_u64(ReduceOp::Sum, &mut [1]).is_err());
            });
            (run.map(|_| ()), seen.into_inner().unwrap())
        });
        match run {
            Err(CommError::RankFailed { rank: 1, message }) => {
                assert_eq!(message, "rank one gives up")
            }
            other => panic!("{n} ranks: run returned {other:?}"),
        }
        assert_eq!(seen.len(), n - 1, "{seen:?}");
        for (_, msg) in &seen {
            assert_eq!(msg, "rank 1 failed: rank one gives up");
        }
    }
}

#[test]
fn rank_panicking_before_first_collective_fails_the_others() {
    let (run, errors) = within(30, || {
        let errors = std::sync::Mutex::new(Vec::new());
        let run = ThreadComm::run(4, &ThreadOptions::default(), |c| {
            if c.rank() == 3 {
                panic!("bad input on rank 3");
            }
            let sub = c.split(0, 0);
            errors
                .lock()
                .unwrap()
                .push(format!("{:?}", sub.map(|s| s.size())));
        });
        (run.map(|_| ()), errors.into_inner().unwrap())
    });
    assert!(
        matches!(&run, Err(CommError::RankFailed { rank: 3, message }) if message == "bad input on rank 3"),
        "{run:?}"
    );
    assert_eq!(errors.len(), 3);
    assert!(
        errors.iter().all(|e| e.contains("RankFailed { rank: 3")),
        "{errors:?}"
    );
}

#[test]
fn panic_inside_a_sub_communicator_reaches_ranks_waiting_elsewhere() {
    let run = within(30, || {
        ThreadComm::run(4, &ThreadOptions::default(), |c| {
            let half = c.split((c.rank() / 2) as u32, 0).unwrap();
            if c.world_rank() == 2 {
                panic!("rank 2 dies in its half");
            }
            if c.rank() == 3 {
                // Waits on rank 2 inside the half {2, 3}.
                return half.barrier().map_err(|e| e.to_string());
            }
            // Ranks 0 and 1 wait on the world.
            c.barrier().map_err(|e| e.to_string())
        })
    });
    assert!(
        matches!(run, Err(CommError::RankFailed { rank: 2, .. })),
        "{run:?}"
    );
}

#[test]
fn rank_returning_early_fails_the_others() {
    let run = within(30, || {
        ThreadComm::run(3, &ThreadOptions::default(), |c| {
            if c.rank() == 0 {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(20));
            c.barrier()
        })
    })
    .unwrap();
    assert!(run[0].is_ok());
    for r in &run[1..] {
        let e = r.as_ref().unwrap_err();
        assert!(
            matches!(
                e,
                CommError::RankExited {
                    rank: 0,
                    op: "barrier"
                }
            ),
            "{e:?}"
        );
        assert!(e.to_string().contains("rank 0 returned"), "{e}");
    }
}

#[test]
fn a_round_completed_before_a_failure_still_delivers() {
    // Rank 1 contributes to the allreduce and then panics; the others still get the sum and
    // only their next collective fails.
    let (run, seen) = within(30, || {
        let seen = std::sync::Mutex::new(Vec::new());
        let run = ThreadComm::run(3, &ThreadOptions::default(), |c| {
            let mut x = [c.rank() as u64 + 1];
            let got = c.allreduce_u64(ReduceOp::Sum, &mut x);
            if c.rank() == 1 {
                panic!("after contributing");
            }
            let next = c.barrier();
            seen.lock()
                .unwrap()
                .push((got.map(|_| x[0]).ok(), next.is_err()));
        });
        (run.map(|_| ()), seen.into_inner().unwrap())
    });
    assert!(
        matches!(run, Err(CommError::RankFailed { rank: 1, .. })),
        "{run:?}"
    );
    assert_eq!(seen, vec![(Some(6), true); 2]);
}

#[test]
fn options_are_validated() {
    let opts = ThreadOptions::default();
    let e = ThreadComm::run(0, &opts, |_| ()).unwrap_err();
    assert_eq!(
        e.to_string(),
        "invalid communicator options: a run needs at least one rank"
    );

    let opts = ThreadOptions {
        cpus: Some(vec![vec![0]]),
        ..Default::default()
    };
    let e = ThreadComm::run(2, &opts, |_| ()).unwrap_err();
    assert_eq!(
        e.to_string(),
        "invalid communicator options: 1 CPU lists given for 2 ranks (one per rank)"
    );

    let opts = ThreadOptions {
        cpus: Some(vec![vec![0], vec![]]),
        ..Default::default()
    };
    let e = ThreadComm::run(2, &opts, |_| ()).unwrap_err();
    assert_eq!(
        e.to_string(),
        "invalid communicator options: rank 1 has an empty CPU list"
    );

    let opts = ThreadOptions {
        hosts: Some(vec!["a".into()]),
        ..Default::default()
    };
    let e = ThreadComm::run(2, &opts, |_| ()).unwrap_err();
    assert!(
        e.to_string().contains("1 host labels given for 2 ranks"),
        "{e}"
    );

    let opts = ThreadOptions {
        hosts: Some(vec!["a".into(), " ".into()]),
        ..Default::default()
    };
    let e = ThreadComm::run(2, &opts, |_| ()).unwrap_err();
    assert!(
        e.to_string().contains("rank 1 has an empty host label"),
        "{e}"
    );
}

#[cfg(target_os = "linux")]
#[test]
fn invalid_cpu_is_named() {
    let opts = ThreadOptions {
        cpus: Some(vec![vec![0], vec![0, 4096]]),
        ..Default::default()
    };
    let e = ThreadComm::run(2, &opts, |_| ()).unwrap_err();
    match &e {
        CommError::InvalidCpu {
            rank: 1,
            cpu: 4096,
            allowed,
        } => assert!(!allowed.is_empty()),
        other => panic!("{other:?}"),
    }
    assert!(
        e.to_string()
            .starts_with("rank 1: CPU 4096 is not available to this process (allowed: "),
        "{e}"
    );
}

/// Reads the calling thread's allowed CPUs from /proc (independent of the crate's code).
#[cfg(target_os = "linux")]
fn cpus_allowed_list() -> String {
    // SAFETY: gettid has no preconditions.
    let tid = unsafe { libc::gettid() };
    let status = std::fs::read_to_string(format!("/proc/self/task/{tid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .unwrap()
        .trim()
        .to_string()
}

#[cfg(target_os = "linux")]
#[test]
fn ranks_are_pinned() {
    let before = cpus_allowed_list();
    let first: usize = before.split([',', '-']).next().unwrap().parse().unwrap();
    let last: usize = before.rsplit([',', '-']).next().unwrap().parse().unwrap();
    let opts = ThreadOptions {
        cpus: Some(vec![vec![first], vec![last], vec![first, last]]),
        ..Default::default()
    };
    let lists = ThreadComm::run(3, &opts, |_| cpus_allowed_list()).unwrap();
    let both = if first == last {
        first.to_string()
    } else if last == first + 1 {
        format!("{first}-{last}")
    } else {
        format!("{first},{last}")
    };
    assert_eq!(lists, vec![first.to_string(), last.to_string(), both]);
    // The caller's own affinity is untouched.
    assert_eq!(cpus_allowed_list(), before);
}

#[test]
fn host_labels_emulate_nodes() {
    let hosts: Vec<String> = ["n1", "n0", "n1", "n0", "n1"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let opts = ThreadOptions {
        hosts: Some(hosts),
        ..Default::default()
    };
    let got = ThreadComm::run(5, &opts, |c| {
        let node = c.split_node().unwrap();
        let mut members = vec![0u64; node.size()];
        node.allgather(&[c.rank() as u64], &mut members).unwrap();
        (c.processor_name(), node.rank(), members)
    })
    .unwrap();
    assert_eq!(got[0], ("n1".to_string(), 0, vec![0, 2, 4]));
    assert_eq!(got[1], ("n0".to_string(), 0, vec![1, 3]));
    assert_eq!(got[2], ("n1".to_string(), 1, vec![0, 2, 4]));
    assert_eq!(got[3], ("n0".to_string(), 1, vec![1, 3]));
    assert_eq!(got[4], ("n1".to_string(), 2, vec![0, 2, 4]));
}

#[test]
fn without_labels_all_ranks_share_the_host() {
    let got = ThreadComm::run(3, &ThreadOptions::default(), |c| {
        c.split_node().unwrap().size()
    })
    .unwrap();
    assert_eq!(got, vec![3, 3, 3]);
}

#[test]
fn results_come_back_in_rank_order() {
    let got = ThreadComm::run(
        4,
        &ThreadOptions {
            stack_size: Some(1 << 20),
            ..Default::default()
        },
        |c| c.rank() * 10,
    )
    .unwrap();
    assert_eq!(got, vec![0, 10, 20, 30]);
}

/// Many rounds back to back (fast ranks run ahead into the next round while slow ones still
/// read the last result): results stay correct.
#[test]
fn many_rounds_stay_consistent() {
    let t = Instant::now();
    let got = ThreadComm::run(4, &ThreadOptions::default(), |c| {
        let mut acc = 0u64;
        for i in 0..2000u64 {
            let mut x = [i + c.rank() as u64];
            c.allreduce_u64(ReduceOp::Sum, &mut x).unwrap();
            assert_eq!(x[0], 4 * i + 6);
            acc += x[0];
            if i % 500 == 0 {
                let sub = c.split((c.rank() % 2) as u32, 0).unwrap();
                sub.barrier().unwrap();
            }
        }
        acc
    })
    .unwrap();
    assert!(got.windows(2).all(|w| w[0] == w[1]));
    assert!(t.elapsed() < Duration::from_secs(60));
}

#[test]
#[should_panic(expected = "alltoallv: 1 send counts for a communicator of 2 ranks")]
fn wrong_count_vector_is_a_contract_violation() {
    // The panic of rank 0 fails the run; re-raise it here to check the message.
    let e = ThreadComm::run(2, &ThreadOptions::default(), |c| {
        if c.rank() == 0 {
            c.alltoallv_bytes(&[1], &[1]).map(|_| ())
        } else {
            c.barrier()
        }
    })
    .unwrap_err();
    panic!("{e}");
}

/// Split-phase exchange counts that do not pair up (rank 1 expects one byte more from rank 0
/// than rank 0 sends) give every rank the same `LengthMismatch`, at the start of whichever
/// rank arrives last and at the finish of the others; the communicator stays usable.
#[test]
fn exchange_counts_that_do_not_pair_up_are_one_error_everywhere() {
    let results = within(20, || {
        ThreadComm::run(2, &ThreadOptions::default(), |c| {
            let expect = if c.rank() == 1 { [3, 1] } else { [1, 2] };
            let send = [7u8; 3];
            let counts = if c.rank() == 0 { [1, 2] } else { [2, 1] };
            let r = c
                .exchange_start(&send[..counts.iter().sum()], &counts, &expect)
                .and_then(|x| c.exchange_finish(x));
            let mut one = [1u64];
            c.allreduce_u64(ReduceOp::Sum, &mut one)?;
            Ok::<_, CommError>((r.map(|p| p.counts()), one[0]))
        })
        .unwrap()
    });
    for r in results {
        let (r, sum) = r.unwrap();
        assert_eq!(sum, 2);
        match r {
            Err(CommError::LengthMismatch { min: 2, max: 3, .. }) => {}
            other => panic!("expected a length mismatch, got {other:?}"),
        }
    }
}
