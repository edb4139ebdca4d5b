//! The box partitioners: no cell lost or duplicated, ACE's work follows the capacities, bad
//! input gives errors that name it.

use hier_part::Plan;
use proptest::prelude::*;
use samr_kernel::{
    Ace, BoxList, BoxPartition, Domain, HierBoxes, LevelBox, Mask, Rect, Sfc, SwitchNode,
    switch_plan,
};

/// Disjoint boxes of levels 0..=2 on a 16 x 16 level-0 domain: each level's domain cut by
/// random kd-splits (at even indices above level 0), a random subset kept.
fn box_list() -> impl Strategy<Value = BoxList> {
    proptest::collection::vec((0u8..=2, any::<u64>(), 0.3f64..1.0), 1..4).prop_map(|specs| {
        let domain = Domain::new(16, 2).unwrap();
        let mut boxes = Vec::new();
        let mut used = [false; 3];
        for (level, seed, keep) in specs {
            if std::mem::replace(&mut used[level as usize], true) {
                continue;
            }
            let mut rng = seed;
            let mut next = move || {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                rng
            };
            let align = if level == 0 { 1 } else { 2 };
            let mut stack = vec![domain.level_rect(level)];
            while let Some(r) = stack.pop() {
                let axis = r.longest_axis();
                let len = r.len(axis);
                if len >= 2 * align && next() % 4 != 0 && r.cells() > 4 {
                    let at = r.lo[axis] + align * (1 + (next() as i64).rem_euclid(len / align - 1));
                    let (a, b) = r.split(axis, at);
                    stack.extend([a, b]);
                } else if (next() % 1000) as f64 / 1000.0 < keep {
                    boxes.push(LevelBox { level, rect: r });
                }
            }
        }
        if boxes.is_empty() {
            boxes.push(LevelBox {
                level: 0,
                rect: Rect::square(16),
            });
        }
        BoxList::new(domain, boxes).unwrap()
    })
}

/// Every input cell in exactly one patch of its level, nothing outside the input, ranks in
/// range, work per rank as reported.
fn check_whole(list: &BoxList, p: &BoxPartition, k: usize) {
    for level in 0..=2u8 {
        let dom = list.domain().level_rect(level);
        let input = Mask::of_rects(
            dom,
            list.boxes()
                .iter()
                .filter(|b| b.level == level)
                .map(|b| &b.rect),
        );
        let mut count = vec![0u32; dom.cells() as usize];
        for q in p.patches.iter().filter(|q| q.b.level == level) {
            assert!(
                !q.b.rect.is_empty() && dom.contains_rect(&q.b.rect),
                "{q:?}"
            );
            if level > 0 {
                assert!(q.b.rect.is_aligned(), "{q:?} cuts a coarse cell");
            }
            for (i, j) in q.b.rect.iter() {
                count[dom.index(i, j)] += 1;
            }
        }
        for (i, j) in dom.iter() {
            let want = u32::from(input.get(i, j));
            assert_eq!(
                count[dom.index(i, j)],
                want,
                "level {level} cell ({i}, {j})"
            );
        }
    }
    let mut work = vec![0u64; k];
    for q in &p.patches {
        assert!((q.rank as usize) < k);
        work[q.rank as usize] += q.b.work();
    }
    assert_eq!(work, p.work);
    assert_eq!(work.iter().sum::<u64>(), list.total_work());
}

fn plan(caps: &[f64]) -> Plan {
    let nodes: Vec<SwitchNode> = (caps.iter())
        .map(|c| SwitchNode {
            ranks: 1,
            mflops: c * 1000.0,
        })
        .collect();
    switch_plan(&nodes, "RCB").unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn no_cell_lost_or_duplicated(
        list in box_list(),
        caps in proptest::collection::vec(0.05f64..1.0, 1..6),
        min_box in 1i64..4,
    ) {
        let k = caps.len();
        check_whole(&list, &Ace { min_box }.partition(&list, &caps).unwrap(), k);
        check_whole(&list, &Sfc { min_box }.partition(&list, &caps).unwrap(), k);
        let h = HierBoxes { min_box, max_share: 0.25 }.partition(&list, &plan(&caps)).unwrap();
        check_whole(&list, &h, k);
    }
}

fn one_box(n: i64) -> BoxList {
    BoxList::new(
        Domain::new(n, 0).unwrap(),
        vec![LevelBox {
            level: 0,
            rect: Rect::square(n),
        }],
    )
    .unwrap()
}

#[test]
fn ace_follows_the_relative_capacities() {
    // Sinha & Parashar §6.1.3: capacities of about 16, 19, 31 and 34 %.
    let caps = [0.16, 0.19, 0.31, 0.34];
    let list = one_box(128);
    let p = Ace { min_box: 4 }.partition(&list, &caps).unwrap();
    let total = list.total_work() as f64;
    for (k, c) in caps.iter().enumerate() {
        let share = p.work[k] as f64 / total;
        assert!(
            (share - c).abs() < 0.015,
            "rank {k}: {share} for capacity {c}"
        );
    }
    // Each rank but the largest stops less than a strip (128 cells) short; the largest takes
    // what they left.
    assert!(
        p.imbalance_percent().iter().all(|i| *i < 5.0),
        "{:?}",
        p.imbalance_percent()
    );
    // Shuffled capacities: the work follows each rank's capacity, not its position.
    let shuffled = [0.31, 0.16, 0.34, 0.19];
    let q = Ace { min_box: 4 }.partition(&list, &shuffled).unwrap();
    let mut by_cap: Vec<(u64, u64)> = (0..4)
        .map(|k| ((shuffled[k] * 100.0) as u64, q.work[k]))
        .collect();
    by_cap.sort();
    let mut sorted = p.work.clone();
    sorted.sort();
    assert_eq!(by_cap.iter().map(|x| x.1).collect::<Vec<_>>(), sorted);
    // GrACE's default ignores the capacities: equal work.
    let s = Sfc { min_box: 4 }.partition(&list, &[1.0; 4]).unwrap();
    assert!(
        s.work.iter().all(|&w| w.abs_diff(4096) <= 128),
        "{:?}",
        s.work
    );
    // Against the real capacities its imbalance is large where ACE's is small.
    let real = BoxPartition {
        ideal: p.ideal.clone(),
        ..s
    };
    assert!(real.imbalance_percent()[0] > 50.0);
}

#[test]
fn ace_gives_the_smallest_boxes_to_the_smallest_capacity() {
    let domain = Domain::new(32, 0).unwrap();
    let sizes = [2, 4, 6, 8];
    let mut boxes = Vec::new();
    let mut x = 0;
    for s in sizes {
        boxes.push(LevelBox {
            level: 0,
            rect: Rect::new([x, 0], [x + s, s]),
        });
        x += s;
    }
    let list = BoxList::new(domain, boxes).unwrap();
    // Capacities in the boxes' proportions (4, 16, 36, 64 cells), ranks listed largest first.
    let p = Ace { min_box: 1 }
        .partition(&list, &[64.0, 36.0, 16.0, 4.0])
        .unwrap();
    assert_eq!(p.work, vec![64, 36, 16, 4]);
    assert!(
        p.patches.iter().all(|q| q.b.rect.len(0) == q.b.rect.len(1)),
        "no box was broken"
    );
}

#[test]
fn bad_capacities_and_constraints_are_errors() {
    let list = one_box(8);
    let e = |c: &[f64]| {
        Ace { min_box: 1 }
            .partition(&list, c)
            .unwrap_err()
            .to_string()
    };
    assert_eq!(
        e(&[1.0, 0.0]),
        "capacity of rank 1 is 0; expected a finite number > 0"
    );
    assert_eq!(
        e(&[f64::NAN]),
        "capacity of rank 0 is NaN; expected a finite number > 0"
    );
    assert_eq!(e(&[]), "capacities has 0 entries, expected 1");
    assert_eq!(
        Domain::new(8, 0)
            .unwrap()
            .check_min_box(9)
            .unwrap_err()
            .to_string(),
        "minimum box size 9 is larger than the domain (8 x 8 cells at level 0)"
    );
    // A minimum box size larger than the boxes: nothing is broken, every box still placed.
    let p = Ace { min_box: 8 }.partition(&list, &[1.0, 1.0]).unwrap();
    assert_eq!(p.patches.len(), 1);
}
