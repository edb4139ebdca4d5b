//! The Zoltan entry points called as a C program would, in one MPI process (a singleton MPI
//! job, no mpirun; the multi-rank runs are `cargo xtask ci`'s): a partition into parts of
//! given sizes, its lists, point and box assign, and the codes of the errors Zoltan has.

use comm::MpiComm;
use std::ffi::{CString, c_int, c_void};
use std::ptr::null_mut;
use zoltan_drum::ZoltanStruct;
use zoltan_drum::error::{ZOLTAN_FATAL, ZOLTAN_OK, ZOLTAN_WARN};
use zoltan_drum::zoltan::*;

struct App {
    coords: Vec<f64>,
    weights: Vec<f32>,
}

unsafe extern "C" fn num_obj(data: *mut c_void, ierr: *mut c_int) -> c_int {
    // SAFETY: `data` is the App registered below; ierr is Zoltan's.
    unsafe {
        *ierr = ZOLTAN_OK;
        ((*data.cast::<App>()).weights.len()) as c_int
    }
}

unsafe extern "C" fn obj_list(
    data: *mut c_void,
    _ng: c_int,
    _nl: c_int,
    gids: *mut u32,
    lids: *mut u32,
    wdim: c_int,
    w: *mut f32,
    ierr: *mut c_int,
) {
    // SAFETY: arrays of the object count, as the library passes.
    unsafe {
        let app = &*data.cast::<App>();
        for (i, &x) in app.weights.iter().enumerate() {
            *gids.add(i) = 100 + i as u32;
            *lids.add(i) = i as u32;
            if wdim > 0 {
                *w.add(i) = x;
            }
        }
        *ierr = ZOLTAN_OK;
    }
}

unsafe extern "C" fn num_geom(_data: *mut c_void, ierr: *mut c_int) -> c_int {
    // SAFETY: Zoltan's ierr.
    unsafe { *ierr = ZOLTAN_OK };
    2
}

unsafe extern "C" fn geom(
    data: *mut c_void,
    _ng: c_int,
    _nl: c_int,
    num: c_int,
    _gids: *mut u32,
    lids: *mut u32,
    dim: c_int,
    x: *mut f64,
    ierr: *mut c_int,
) {
    // SAFETY: num ids and num·dim coordinates, as the library passes.
    unsafe {
        let app = &*data.cast::<App>();
        for i in 0..num as usize {
            let l = *lids.add(i) as usize;
            for j in 0..dim as usize {
                *x.add(i * 2 + j) = app.coords[l * 2 + j];
            }
        }
        *ierr = ZOLTAN_OK;
    }
}

fn set(zz: *mut ZoltanStruct, name: &str, value: &str) -> c_int {
    let (n, v) = (CString::new(name).unwrap(), CString::new(value).unwrap());
    // SAFETY: a live structure and two C strings.
    unsafe { Zoltan_Set_Param(zz, n.as_ptr(), v.as_ptr()) }
}

#[test]
fn one_process_partition_lists_assign_and_errors() {
    let world = MpiComm::init().expect("MPI (a singleton job)");
    let mut ver = 0.0f32;
    assert_eq!(
        // SAFETY: a pointer to a local.
        unsafe { Zoltan_Initialize(0, null_mut(), &mut ver) },
        ZOLTAN_OK
    );
    assert_eq!(ver, 3.90);
    // SAFETY: the world communicator of this process's MPI, live until the end.
    let mut zz = unsafe { Zoltan_Create(world.as_raw()) };
    assert!(!zz.is_null());

    let n = 2000;
    let mut s = 7u64;
    let mut u = || {
        s = s
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (s >> 11) as f64 / 9007199254740992.0
    };
    let coords: Vec<f64> = (0..2 * n).map(|_| u()).collect();
    let weights: Vec<f32> = (0..n).map(|_| 0.5 + u() as f32).collect();
    let mut app = App { coords, weights };
    let data = (&mut app as *mut App).cast::<c_void>();

    assert_eq!(set(zz, "NO_SUCH_PARAMETER", "1"), ZOLTAN_WARN);
    assert_eq!(set(zz, "LB_METHOD", "GRAPH"), ZOLTAN_FATAL);
    assert_eq!(set(zz, "IMBALANCE_TOL", "0.5"), ZOLTAN_WARN);
    for (name, value) in [
        ("DEBUG_LEVEL", "0"),
        ("LB_METHOD", "hsfc"),
        ("OBJ_WEIGHT_DIM", "1"),
        ("NUM_GLOBAL_PARTS", "4"),
        ("RETURN_LISTS", "PARTS"),
        ("REMAP", "0"),
    ] {
        assert_eq!(set(zz, name, value), ZOLTAN_OK, "{name}");
    }
    // SAFETY: a live structure, functions of the declared types, data the App that outlives it.
    unsafe {
        assert_eq!(Zoltan_Set_Num_Obj_Fn(zz, Some(num_obj), data), ZOLTAN_OK);
        assert_eq!(Zoltan_Set_Obj_List_Fn(zz, Some(obj_list), data), ZOLTAN_OK);
        assert_eq!(Zoltan_Set_Num_Geom_Fn(zz, Some(num_geom), data), ZOLTAN_OK);
        assert_eq!(Zoltan_Set_Geom_Multi_Fn(zz, Some(geom), data), ZOLTAN_OK);
    }
    let mut ids = [0, 1, 2, 3];
    let mut sizes = [1.0f32, 2.0, 3.0, 4.0];
    // SAFETY: a live structure and arrays of 4 values.
    let rc = unsafe {
        Zoltan_LB_Set_Part_Sizes(zz, 1, 4, ids.as_mut_ptr(), null_mut(), sizes.as_mut_ptr())
    };
    assert_eq!(rc, ZOLTAN_OK);

    let partition = |zz: *mut ZoltanStruct| {
        let (mut ch, mut ng, mut nl, mut ni, mut ne) = (0, 0, 0, 0, 0);
        let (mut ig, mut il, mut eg, mut el) = (null_mut(), null_mut(), null_mut(), null_mut());
        let (mut ip, mut it, mut ep, mut et) = (null_mut(), null_mut(), null_mut(), null_mut());
        // SAFETY: every output is a local.
        let rc = unsafe {
            Zoltan_LB_Partition(
                zz, &mut ch, &mut ng, &mut nl, &mut ni, &mut ig, &mut il, &mut ip, &mut it,
                &mut ne, &mut eg, &mut el, &mut ep, &mut et,
            )
        };
        let parts: Vec<c_int> = if ne > 0 {
            // SAFETY: the library's array of ne entries.
            unsafe { std::slice::from_raw_parts(et, ne as usize) }.to_vec()
        } else {
            Vec::new()
        };
        let lids: Vec<u32> = if ne > 0 {
            // SAFETY: the library's array of ne entries.
            unsafe { std::slice::from_raw_parts(el, ne as usize) }.to_vec()
        } else {
            Vec::new()
        };
        // SAFETY: arrays from Zoltan_LB_Partition, freed once.
        unsafe {
            Zoltan_LB_Free_Part(&mut ig, &mut il, &mut ip, &mut it);
            Zoltan_LB_Free_Part(&mut eg, &mut el, &mut ep, &mut et);
        }
        assert!(
            eg.is_null() && et.is_null(),
            "Free_Part clears the pointers"
        );
        (rc, ni, parts, lids)
    };
    let (rc, ni, parts, lids) = partition(zz);
    assert!(rc == ZOLTAN_OK || rc == ZOLTAN_WARN, "rc {rc}");
    assert_eq!(ni, -1, "RETURN_LISTS=PARTS returns no import list");
    assert_eq!(parts.len(), n, "every object is in the PARTS list");
    assert_eq!(lids, (0..n as u32).collect::<Vec<_>>());
    let mut w = [0.0f64; 4];
    for (i, &p) in parts.iter().enumerate() {
        w[p as usize] += f64::from(app.weights[i]);
    }
    let total: f64 = w.iter().sum();
    for (p, wp) in w.iter().enumerate() {
        let target = total * (p + 1) as f64 / 10.0;
        assert!((wp - target).abs() <= 1.5, "part {p}: {wp} vs {target}");
    }

    // No cuts kept: point assign is refused, as in Zoltan.
    let (mut proc, mut part) = (-1, -1);
    let mut x = [0.5, 0.5];
    // SAFETY: a live structure and locals.
    let rc = unsafe { Zoltan_LB_Point_PP_Assign(zz, x.as_mut_ptr(), &mut proc, &mut part) };
    assert_eq!(rc, ZOLTAN_FATAL);
    assert_eq!(set(zz, "KEEP_CUTS", "1"), ZOLTAN_OK);
    let (rc, _, parts, _) = partition(zz);
    assert!(rc == ZOLTAN_OK || rc == ZOLTAN_WARN);
    for i in (0..n).step_by(97) {
        let mut x = [app.coords[2 * i], app.coords[2 * i + 1]];
        // SAFETY: a live structure and locals.
        let rc = unsafe { Zoltan_LB_Point_PP_Assign(zz, x.as_mut_ptr(), &mut proc, &mut part) };
        assert_eq!((rc, part, proc), (ZOLTAN_OK, parts[i], 0), "object {i}");
    }
    // Point_Assign wants parts = processes.
    // SAFETY: a live structure and locals.
    let rc = unsafe { Zoltan_LB_Point_Assign(zz, x.as_mut_ptr(), &mut proc) };
    assert_eq!(rc, ZOLTAN_FATAL);
    let (mut bp, mut nbp, mut br, mut nbr) = ([0; 4], 0, [0; 1], 0);
    // SAFETY: a live structure, and arrays that hold the process and part counts.
    let rc = unsafe {
        Zoltan_LB_Box_PP_Assign(
            zz,
            0.0,
            0.0,
            0.0,
            1.0,
            1.0,
            0.0,
            br.as_mut_ptr(),
            &mut nbr,
            bp.as_mut_ptr(),
            &mut nbp,
        )
    };
    assert_eq!((rc, nbp, nbr, bp, br), (ZOLTAN_OK, 4, 1, [0, 1, 2, 3], [0]));

    // A coordinate that is not finite is an error, whoever checks it (RCB leaves the check to
    // hier-part, HSFC with kept cuts checks the queried coordinates).
    app.coords[7] = f64::NAN;
    for method in ["RCB", "HSFC"] {
        assert_eq!(set(zz, "LB_METHOD", method), ZOLTAN_OK);
        assert_eq!(
            partition(zz).0,
            ZOLTAN_FATAL,
            "{method} with a NaN coordinate"
        );
    }

    // A NULL structure is an error, never a crash.
    assert_eq!(set(null_mut(), "LB_METHOD", "RCB"), ZOLTAN_FATAL);
    // SAFETY: a pointer to the live structure; it is NULL afterwards.
    unsafe { Zoltan_Destroy(&mut zz) };
    assert!(zz.is_null());
    // SAFETY: a pointer to NULL.
    unsafe { Zoltan_Destroy(&mut zz) };
    drop(world);
}
