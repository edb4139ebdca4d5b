//! The C ABI called from Rust: results equal the Rust API's, and every failure (null
//! pointers, bad dims, bad data, short buffers) gives its own code and a message naming the
//! culprit, with the documented effect on the outputs.

use hsfc::Workspace;
use hsfc_capi::*;
use part_api::Serial;
use part_api::{Partitioner, Points};
use std::ffi::{CStr, c_int};
use std::ptr::{null, null_mut};

fn last() -> String {
    // SAFETY: a NUL-terminated string owned by this thread, copied at once.
    unsafe { CStr::from_ptr(hsfc_last_error_message()) }
        .to_str()
        .unwrap()
        .to_string()
}

/// Asserts a failed call's code (by name, for readable failures) and its full message.
fn check_err(rc: c_int, code: c_int, message: &str) {
    let name = |c| {
        // SAFETY: a static NUL-terminated string.
        unsafe { CStr::from_ptr(hsfc_error_name(c)) }
            .to_str()
            .unwrap()
    };
    assert_eq!(name(rc), name(code), "status code");
    assert_eq!(last(), message);
}

/// A deterministic cloud of `n` points in `dim` dimensions and weights in [0.5, 1.5).
fn cloud(n: usize, dim: usize, seed: u64) -> (Vec<f64>, Vec<f64>) {
    let mut s = seed;
    let mut next = move || {
        s = s
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (s >> 11) as f64 / (1u64 << 53) as f64
    };
    let coords = (0..n * dim).map(|_| next()).collect();
    let weights = (0..n).map(|_| 0.5 + next()).collect();
    (coords, weights)
}

/// Owns a handle for the test's duration.
struct Handle(*mut HsfcPartition);
impl Drop for Handle {
    fn drop(&mut self) {
        // SAFETY: a live handle (or NULL), freed once.
        unsafe { hsfc_free(self.0) };
    }
}

/// `hsfc_partition` on slices; `Err(code)` keeps the message in `last()`.
fn partition(
    coords: &[f64],
    dim: c_int,
    weights: Option<&[f64]>,
    sizes: &[f64],
    threads: c_int,
    parts: &mut [u32],
) -> Result<Handle, c_int> {
    let mut out = std::ptr::dangling_mut::<HsfcPartition>(); // must come back NULL on error
    let n = coords.len() / dim.max(1) as usize;
    assert_eq!(parts.len(), n);
    // SAFETY: every slice holds the lengths the call reads.
    let rc = unsafe {
        hsfc_partition(
            coords.as_ptr(),
            n,
            dim,
            weights.map_or(null(), |w| w.as_ptr()),
            sizes.as_ptr(),
            sizes.len(),
            threads,
            parts.as_mut_ptr(),
            &mut out,
        )
    };
    if rc == HSFC_OK {
        assert!(!out.is_null());
        Ok(Handle(out))
    } else {
        assert!(out.is_null(), "out must be NULL after an error");
        Err(rc)
    }
}

fn weights_of(p: &Handle) -> Vec<f64> {
    let mut k = 0usize;
    // SAFETY: a live handle and a writable count.
    assert_eq!(unsafe { hsfc_num_parts(p.0, &mut k) }, HSFC_OK);
    let mut w = vec![f64::NAN; k];
    assert_eq!(
        // SAFETY: live handle; arrays of the lengths given.
        unsafe { hsfc_part_weights(p.0, w.as_mut_ptr(), k) },
        HSFC_OK
    );
    w
}

#[test]
fn partition_through_the_abi_equals_the_rust_api_for_any_thread_count() {
    for dim in [2usize, 3] {
        let (coords, weights) = cloud(2000, dim, 7 + dim as u64);
        let sizes = [16.0, 19.0, 0.0, 31.0, 34.0];
        let mut expected = vec![0u32; 2000];
        let r = hsfc::Hsfc::default()
            .partition(
                &Serial,
                Points::new(&coords, dim, Some(&weights)),
                &sizes,
                &mut expected,
            )
            .unwrap();
        for threads in [-1, 0, 1, 2, 3] {
            let mut parts = vec![u32::MAX; 2000];
            let p = partition(
                &coords,
                dim as c_int,
                Some(&weights),
                &sizes,
                threads,
                &mut parts,
            )
            .unwrap();
            assert_eq!(parts, expected, "dim {dim}, threads {threads}");
            assert_eq!(weights_of(&p), r.part_weights());
            let (mut t, mut c) = (vec![0.0; 5], vec![0u64; 5]);
            let (mut d, mut dev, mut imb, mut wmax, mut n) = (0, 0.0, 0.0, 0.0, 0u64);
            // SAFETY: live handle; arrays of the lengths given.
            unsafe {
                assert_eq!(hsfc_targets(p.0, t.as_mut_ptr(), 5), HSFC_OK);
                assert_eq!(hsfc_part_counts(p.0, c.as_mut_ptr(), 5), HSFC_OK);
                assert_eq!(hsfc_dim(p.0, &mut d), HSFC_OK);
                assert_eq!(hsfc_max_rel_dev(p.0, &mut dev), HSFC_OK);
                assert_eq!(hsfc_imbalance(p.0, &mut imb), HSFC_OK);
                assert_eq!(hsfc_max_weight(p.0, &mut wmax), HSFC_OK);
                assert_eq!(hsfc_num_points(p.0, &mut n), HSFC_OK);
            }
            assert_eq!(t, r.targets());
            assert_eq!(c, r.part_counts());
            assert_eq!(c[2], 0, "a size of 0 gives an empty part");
            assert_eq!((d as usize, n), (dim, 2000));
            assert_eq!(
                (dev, imb, wmax),
                (r.max_rel_dev(), r.imbalance(), r.max_weight())
            );
            // Point assign and bulk assign give every point its part.
            let mut again = vec![u32::MAX; 2000];
            // SAFETY: live handle; arrays of the lengths given.
            let rc = unsafe { hsfc_assign(p.0, coords.as_ptr(), 2000, again.as_mut_ptr()) };
            assert_eq!(rc, HSFC_OK);
            assert_eq!(again, expected);
            for (i, x) in coords.chunks_exact(dim).enumerate().step_by(97) {
                let mut q = u32::MAX;
                assert_eq!(
                    // SAFETY: live handle; `x` holds dim values.
                    unsafe { hsfc_point_assign(p.0, x.as_ptr(), &mut q) },
                    HSFC_OK
                );
                assert_eq!(q, expected[i]);
            }
        }
    }
}

#[test]
fn box_assign_reports_the_needed_length_and_writes_nothing_when_cap_is_short() {
    let (coords, _) = cloud(3000, 2, 3);
    let mut parts = vec![0u32; 3000];
    let sizes = [1.0; 8];
    let p = partition(&coords, 2, None, &sizes, 1, &mut parts).unwrap();
    let r = hsfc::Hsfc::default()
        .partition(
            &Serial,
            Points::new(&coords, 2, None),
            &sizes,
            &mut vec![0; 3000],
        )
        .unwrap();
    let (lo, hi) = ([0.1, 0.2], [0.7, 0.5]);
    let mut expected = Vec::new();
    r.box_assign(&lo, &hi, &mut expected).unwrap();
    let m = expected.len();
    assert!(m >= 3, "the box should meet several parts: {expected:?}");

    // `hsfc_box_assign` into `out` (NULL if None) with capacity `cap`: (status, *count).
    let call = |out: Option<&mut [u32]>, cap: usize| {
        let mut count = usize::MAX;
        let out = out.map_or(null_mut(), |o| {
            assert!(o.len() >= cap);
            o.as_mut_ptr()
        });
        // SAFETY: live handle; `out` holds at least `cap` values.
        let rc = unsafe { hsfc_box_assign(p.0, lo.as_ptr(), hi.as_ptr(), out, cap, &mut count) };
        (rc, count)
    };
    // Length query.
    let (rc, count) = call(None, 0);
    check_err(
        rc,
        HSFC_ERR_BUFFER_TOO_SMALL,
        &format!("parts holds 0 values; {m} are needed"),
    );
    assert_eq!(count, m);
    // One short: untouched.
    let mut out = vec![77u32; 8];
    assert_eq!(call(Some(&mut out), m - 1), (HSFC_ERR_BUFFER_TOO_SMALL, m));
    assert_eq!(out, vec![77; 8]);
    // Exactly enough, and more than enough.
    for cap in [m, 8] {
        let mut out = vec![77u32; 8];
        assert_eq!(call(Some(&mut out), cap), (HSFC_OK, m));
        assert_eq!(&out[..m], &expected[..]);
        assert!(out[m..].iter().all(|&v| v == 77), "wrote past count");
    }
    // A bad box (lo and hi swapped) is the Rust error's code and message.
    let mut count = 0;
    // SAFETY: live handle; `out` holds 8 values.
    let rc = unsafe {
        hsfc_box_assign(
            p.0,
            hi.as_ptr(),
            lo.as_ptr(),
            out.as_mut_ptr(),
            8,
            &mut count,
        )
    };
    check_err(
        rc,
        HSFC_ERR_INVALID_BOX,
        "box axis 0: [0.7, 0.1] is not a finite interval with lo <= hi",
    );
}

#[test]
fn array_accessors_refuse_short_buffers_without_writing() {
    let (coords, _) = cloud(100, 2, 5);
    let p = partition(&coords, 2, None, &[1.0, 2.0, 3.0], 1, &mut [0; 100]).unwrap();
    let mut w = [-1.0f64; 2];
    let mut c = [9u64; 2];
    // SAFETY: live handle; arrays at least as long as the lengths given.
    unsafe {
        let rc = hsfc_part_weights(p.0, w.as_mut_ptr(), 2);
        check_err(
            rc,
            HSFC_ERR_BUFFER_TOO_SMALL,
            "the output array holds 2 values; 3 are needed",
        );
        assert_eq!(
            hsfc_targets(p.0, w.as_mut_ptr(), 2),
            HSFC_ERR_BUFFER_TOO_SMALL
        );
        assert_eq!(
            hsfc_part_counts(p.0, c.as_mut_ptr(), 2),
            HSFC_ERR_BUFFER_TOO_SMALL
        );
        // A long enough length with a NULL array is a null pointer, not a crash.
        let rc = hsfc_part_weights(p.0, null_mut(), 3);
        check_err(rc, HSFC_ERR_NULL_POINTER, "the output array is NULL");
    }
    assert_eq!((w, c), ([-1.0; 2], [9; 2]));
}

#[test]
fn every_required_null_pointer_is_named() {
    let (coords, w) = cloud(10, 2, 1);
    let (c, w, sizes) = (coords.as_ptr(), w.as_ptr(), [1.0, 1.0].as_ptr());
    let mut parts = [0u32; 10];
    let p = partition(&coords, 2, None, &[1.0, 1.0], 1, &mut parts).unwrap();
    let (pp, h) = (parts.as_mut_ptr(), p.0.cast_const());
    let mut out = std::ptr::dangling_mut::<HsfcPartition>();
    let o: *mut *mut HsfcPartition = &mut out;
    let (mut k, mut q, mut d, mut f, mut n) = (0usize, 0u32, 0, 0.0, 0u64);
    let x = [0.5, 0.5].as_ptr();
    // Each call fails with the null-pointer code and a message naming the argument.
    macro_rules! null {
        ($what:expr, $call:expr) => {{
            // SAFETY: every non-NULL pointer is valid for what the call reads or writes.
            let rc = unsafe { $call };
            check_err(rc, HSFC_ERR_NULL_POINTER, concat!($what, " is NULL"));
        }};
    }
    null!(
        "coords",
        hsfc_partition(null(), 10, 2, w, sizes, 2, 1, pp, o)
    );
    null!("sizes", hsfc_partition(c, 10, 2, w, null(), 2, 1, pp, o));
    null!(
        "parts",
        hsfc_partition(c, 10, 2, w, sizes, 2, 1, null_mut(), o)
    );
    assert!(out.is_null(), "*out is NULL after an error");
    null!(
        "out",
        hsfc_partition(c, 10, 2, w, sizes, 2, 1, pp, null_mut())
    );
    let m = null_mut();
    null!(
        "prev",
        hsfc_repartition(null(), c, 10, 2, w, sizes, 2, 1, 0.0, pp, m, o)
    );
    null!(
        "coords",
        hsfc_repartition(h, null(), 10, 2, w, sizes, 2, 1, 0.0, pp, m, o)
    );
    null!(
        "sizes",
        hsfc_repartition(h, c, 10, 2, w, null(), 2, 1, 0.0, pp, m, o)
    );
    null!(
        "parts",
        hsfc_repartition(h, c, 10, 2, w, sizes, 2, 1, 0.0, null_mut(), m, o)
    );
    null!(
        "out",
        hsfc_repartition(h, c, 10, 2, w, sizes, 2, 1, 0.0, pp, m, null_mut())
    );
    null!("p", hsfc_point_assign(null(), x, &mut q));
    null!("x", hsfc_point_assign(h, null(), &mut q));
    null!("part", hsfc_point_assign(h, x, null_mut()));
    null!("p", hsfc_assign(null(), c, 10, pp));
    null!("coords", hsfc_assign(h, null(), 10, pp));
    null!("parts", hsfc_assign(h, c, 10, null_mut()));
    null!("p", hsfc_box_assign(null(), x, x, pp, 2, &mut k));
    null!("lo", hsfc_box_assign(h, null(), x, pp, 2, &mut k));
    null!("hi", hsfc_box_assign(h, x, null(), pp, 2, &mut k));
    null!("count", hsfc_box_assign(h, x, x, pp, 2, null_mut()));
    null!("parts", hsfc_box_assign(h, x, x, null_mut(), 2, &mut k));
    null!("p", hsfc_num_parts(null(), &mut k));
    null!("k", hsfc_num_parts(h, null_mut()));
    null!("p", hsfc_dim(null(), &mut d));
    null!("dim", hsfc_dim(h, null_mut()));
    null!("p", hsfc_num_points(null(), &mut n));
    null!("n", hsfc_num_points(h, null_mut()));
    null!("p", hsfc_part_weights(null(), &mut f, 1));
    null!("p", hsfc_part_counts(null(), &mut n, 1));
    null!("p", hsfc_targets(null(), &mut f, 1));
    null!("p", hsfc_max_rel_dev(null(), &mut f));
    null!("dev", hsfc_max_rel_dev(h, null_mut()));
    null!("p", hsfc_imbalance(null(), &mut f));
    null!("imbalance", hsfc_imbalance(h, null_mut()));
    null!("p", hsfc_max_weight(null(), &mut f));
    null!("w", hsfc_max_weight(h, null_mut()));
    // Optional pointers: NULL weights are unit weights, a NULL migration is not written.
    // SAFETY: as above.
    let rc = unsafe { hsfc_repartition(h, c, 10, 2, null(), sizes, 2, 1, 0.0, pp, m, o) };
    assert_eq!(rc, HSFC_OK, "{}", last());
    // SAFETY: a live handle, freed once; freeing NULL is a no-op.
    unsafe {
        hsfc_free(out);
        hsfc_free(null_mut());
    }
}

#[test]
fn no_points_is_a_partition_with_empty_parts() {
    let mut out = null_mut();
    // SAFETY: n = 0, so no array is read or written.
    let rc = unsafe {
        hsfc_partition(
            null(),
            0,
            3,
            null(),
            [1.0, 2.0].as_ptr(),
            2,
            1,
            null_mut(),
            &mut out,
        )
    };
    assert_eq!(rc, HSFC_OK, "{}", last());
    let p = Handle(out);
    let (mut n, mut c) = (7u64, [9u64; 2]);
    // SAFETY: live handle; arrays of the lengths given; n = 0 reads nothing.
    unsafe {
        assert_eq!(hsfc_num_points(p.0, &mut n), HSFC_OK);
        assert_eq!(hsfc_part_counts(p.0, c.as_mut_ptr(), 2), HSFC_OK);
        assert_eq!(hsfc_assign(p.0, null(), 0, null_mut()), HSFC_OK);
        let mut q = 9u32;
        assert_eq!(
            hsfc_point_assign(p.0, [1.0, 2.0, 3.0].as_ptr(), &mut q),
            HSFC_OK
        );
        assert!(q < 2);
        let mut m = HsfcMigration::default();
        let rc = hsfc_repartition(
            p.0,
            null(),
            0,
            3,
            null(),
            [1.0, 1.0].as_ptr(),
            2,
            1,
            0.0,
            null_mut(),
            &mut m,
            &mut out,
        );
        assert_eq!(rc, HSFC_OK, "{}", last());
        hsfc_free(out);
        assert_eq!((m.weight, m.count), (0.0, 0));
    }
    assert_eq!((n, c), (0, [0, 0]));
}

#[test]
fn each_bad_argument_gives_its_own_code_and_message() {
    let (coords, w) = cloud(20, 2, 9);
    let mut parts = [0u32; 20];
    let sizes = [1.0, 1.0];
    for (dim, msg) in [
        (1, "dimension 1 is not supported (2 or 3)"),
        (4, "dimension 4 is not supported (2 or 3)"),
        (-2, "dimension -2 is not supported (2 or 3)"),
    ] {
        // The raw call, so that n is not derived from dim.
        let mut out = null_mut();
        // SAFETY: dim is rejected before any array is read.
        let rc = unsafe {
            hsfc_partition(
                coords.as_ptr(),
                5,
                dim,
                null(),
                sizes.as_ptr(),
                2,
                1,
                parts.as_mut_ptr(),
                &mut out,
            )
        };
        check_err(rc, HSFC_ERR_DIMENSION, msg);
    }
    let mut bad_w = w.clone();
    bad_w[4] = f64::INFINITY;
    let mut bad_c = coords.clone();
    bad_c[7] = f64::NAN;
    // (coords, weights, sizes, code, message)
    type Case<'a> = (&'a [f64], Option<&'a [f64]>, &'a [f64], c_int, &'a str);
    let cases: [Case; 5] = [
        (
            &coords,
            None,
            &[],
            HSFC_ERR_NO_PARTS,
            "no parts requested (k = 0)",
        ),
        (
            &coords,
            None,
            &[1.0, -1.0],
            HSFC_ERR_INVALID_TARGET,
            "target size 1 is -1; sizes must be finite and >= 0",
        ),
        (
            &coords,
            None,
            &[0.0, 0.0],
            HSFC_ERR_ZERO_TARGETS,
            "all 2 target sizes are 0",
        ),
        (
            &coords,
            Some(&bad_w),
            &sizes,
            HSFC_ERR_INVALID_WEIGHT,
            "point 4: weight is inf; weights must be finite and >= 0",
        ),
        (
            &bad_c,
            Some(&w),
            &sizes,
            HSFC_ERR_INVALID_COORDINATE,
            "point 3: coordinate 1 is NaN; coordinates must be finite",
        ),
    ];
    for (coords, w, sizes, code, msg) in cases {
        let rc = partition(coords, 2, w, sizes, 1, &mut parts)
            .err()
            .expect(msg);
        check_err(rc, code, msg);
    }
    // Counts beyond the u32 limits are refused before any array is formed from them.
    let mut out = null_mut();
    // SAFETY: n and k are rejected before any array is read.
    unsafe {
        let big = u32::MAX as usize + 1;
        let rc = hsfc_partition(
            coords.as_ptr(),
            big,
            2,
            null(),
            sizes.as_ptr(),
            2,
            1,
            parts.as_mut_ptr(),
            &mut out,
        );
        check_err(
            rc,
            HSFC_ERR_TOO_MANY_POINTS,
            &format!("{big} points on one rank; at most 4294967295 are supported"),
        );
        let rc = hsfc_partition(
            coords.as_ptr(),
            20,
            2,
            null(),
            sizes.as_ptr(),
            big,
            1,
            parts.as_mut_ptr(),
            &mut out,
        );
        check_err(
            rc,
            HSFC_ERR_TOO_MANY_PARTS,
            &format!("{big} parts requested; at most 4294967295 are supported"),
        );
    }
    // Repartition: tolerance and a previous partition of another shape.
    let p = partition(&coords, 2, None, &sizes, 1, &mut parts).unwrap();
    for (tol, k, code, msg) in [
        (
            1.0,
            2,
            HSFC_ERR_INVALID_TOLERANCE,
            "tolerance 1 is not in [0, 1)",
        ),
        (
            0.1,
            3,
            HSFC_ERR_INCOMPATIBLE_PREVIOUS,
            "previous partition has dim 2 and 2 parts; got dim 2 and 3",
        ),
    ] {
        let before = parts;
        // SAFETY: arrays of the lengths given.
        let rc = unsafe {
            hsfc_repartition(
                p.0,
                coords.as_ptr(),
                20,
                2,
                null(),
                [1.0; 3].as_ptr(),
                k,
                1,
                tol,
                parts.as_mut_ptr(),
                null_mut(),
                &mut out,
            )
        };
        check_err(rc, code, msg);
        assert!(out.is_null());
        assert_eq!(
            parts, before,
            "this version leaves parts alone on argument errors"
        );
    }
    // A point given to point_assign.
    let mut q = 0;
    // SAFETY: live handle; x holds dim values.
    let rc = unsafe { hsfc_point_assign(p.0, [f64::NEG_INFINITY, 0.0].as_ptr(), &mut q) };
    check_err(
        rc,
        HSFC_ERR_INVALID_COORDINATE,
        "point 0: coordinate 0 is -inf; coordinates must be finite",
    );
}

#[test]
fn repartition_reports_the_migration_it_made() {
    let (coords, mut w) = cloud(4000, 3, 11);
    let sizes = [1.5, 1.0, 1.5, 1.0];
    let mut parts = vec![0u32; 4000];
    let p = partition(&coords, 3, Some(&w), &sizes, 2, &mut parts).unwrap();
    for (i, x) in coords.chunks_exact(3).enumerate() {
        if x[2] < 0.25 {
            w[i] *= 2.0;
        }
    }
    let before = parts.clone();
    // The Rust API on the same input.
    let cfg = hsfc::Hsfc {
        tolerance: 0.05,
        ..Default::default()
    };
    let prev = cfg
        .partition(
            &Serial,
            Points::new(&coords, 3, Some(&cloud(4000, 3, 11).1)),
            &sizes,
            &mut vec![0; 4000],
        )
        .unwrap();
    let mut expected = before.clone();
    let r = cfg
        .repartition(
            &mut Workspace::default(),
            &Serial,
            &prev,
            Points::new(&coords, 3, Some(&w)),
            &sizes,
            &mut expected,
        )
        .unwrap();

    for with_migration in [true, false] {
        let mut m = HsfcMigration {
            weight: -1.0,
            count: 99,
            kept_cuts: 7,
        };
        let mut out = null_mut();
        parts.copy_from_slice(&before);
        // SAFETY: arrays of the lengths given; `m` is writable.
        let rc = unsafe {
            hsfc_repartition(
                p.0,
                coords.as_ptr(),
                4000,
                3,
                w.as_ptr(),
                sizes.as_ptr(),
                4,
                2,
                0.05,
                parts.as_mut_ptr(),
                if with_migration { &mut m } else { null_mut() },
                &mut out,
            )
        };
        assert_eq!(rc, HSFC_OK, "{}", last());
        let p2 = Handle(out);
        assert_eq!(parts, expected);
        assert_eq!(weights_of(&p2), r.part_weights());
        let moved: Vec<usize> = (0..4000).filter(|&i| parts[i] != before[i]).collect();
        if with_migration {
            let rm = r.migration().unwrap();
            assert_eq!(m.count, moved.len() as u64);
            assert_eq!((m.weight, m.count, m.kept_cuts), (rm.weight, rm.count, 1));
            assert!(m.count > 0 && m.count < 4000 / 2, "moved {}", m.count);
        } else {
            assert_eq!(m.count, 99, "NULL migration: nothing written");
        }
    }
}

#[test]
fn the_last_error_is_per_thread_and_kept_by_successful_calls() {
    let mut k = 0usize;
    assert_eq!(
        // SAFETY: NULL handle, reported as an error.
        unsafe { hsfc_num_parts(null(), &mut k) },
        HSFC_ERR_NULL_POINTER
    );
    assert_eq!(last(), "p is NULL");
    // Another thread has its own (empty) message, and its failures do not touch ours.
    std::thread::spawn(|| {
        assert_eq!(last(), "");
        assert_eq!(
            // SAFETY: as above.
            unsafe { hsfc_dim(null(), null_mut()) },
            HSFC_ERR_NULL_POINTER
        );
        assert_eq!(last(), "p is NULL");
        let mut d = 0;
        let (coords, _) = cloud(4, 2, 1);
        let p = partition(&coords, 2, None, &[1.0], 1, &mut [0; 4]).unwrap();
        // SAFETY: live handle.
        assert_eq!(unsafe { hsfc_dim(p.0, &mut d) }, HSFC_OK);
        assert_eq!(last(), "p is NULL", "a successful call keeps the message");
    })
    .join()
    .unwrap();
    assert_eq!(last(), "p is NULL");
}
