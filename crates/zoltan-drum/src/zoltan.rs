//! Zoltan's C entry points for geometric load balancing, with Zoltan's names, types and
//! return codes (declared in `include/zoltan.h`, whose declarations a CI check compiles
//! together with the real `zoltan.h`, so the signatures are Zoltan's).

use crate::error::{Done, Error, ZOLTAN_OK, zoltan_guard};
use crate::laps::Laps;
use crate::lists::{CBuf, List, Lists, c_free, lists};
use crate::query::{
    Registered, ZoltanGeomFn, ZoltanGeomMultiFn, ZoltanIdPtr, ZoltanMidMigratePpFn,
    ZoltanNumGeomFn, ZoltanNumObjFn, ZoltanObjListFn, ZoltanObjSizeFn, ZoltanObjSizeMultiFn,
    ZoltanPackObjFn, ZoltanPackObjMultiFn, ZoltanPostMigratePpFn, ZoltanPreMigratePpFn,
    ZoltanUnpackObjFn, ZoltanUnpackObjMultiFn, count,
};
use crate::zz::{Cuts, ZoltanStruct};
use comm::{Comm, MpiComm, RawComm};
use std::ffi::{CStr, c_char, c_int, c_void};
use std::panic::{AssertUnwindSafe, catch_unwind};

/// `ZOLTAN_VERSION_NUMBER` of the Zoltan whose interface this library implements.
pub const ZOLTAN_VERSION_NUMBER: f32 = 3.90;

/// The structure pointer an entry point was given, vouched for by the caller as NULL or live.
struct Zz(*mut ZoltanStruct);

impl Zz {
    /// # Safety
    /// `zz` is NULL or a live structure from [`Zoltan_Create`], used by nothing else during
    /// the call.
    unsafe fn new(zz: *mut ZoltanStruct) -> Zz {
        Zz(zz)
    }

    /// Runs one entry point on the structure under [`zoltan_guard`] (with the rank in its
    /// messages when the structure is live): NULL is an error.
    fn run(
        self,
        function: &str,
        f: impl FnOnce(&mut ZoltanStruct) -> Result<Done, Error>,
    ) -> c_int {
        // SAFETY: NULL or live (`Zz::new`'s contract).
        let rank = unsafe { self.0.as_ref() }.map(ZoltanStruct::rank);
        zoltan_guard(rank, function, || {
            // SAFETY: NULL or live, and not aliased during the call (`Zz::new`'s contract).
            let zz = unsafe { self.0.as_mut() }.ok_or(Error::Null("the Zoltan structure"))?;
            f(zz)
        })
    }
}

/// `Zoltan_Initialize`: checks that MPI is initialised (this library never initialises MPI:
/// call `MPI_Init` first) and writes the Zoltan version this library implements to `*ver`.
///
/// # Safety
/// `ver` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn Zoltan_Initialize(
    _argc: c_int,
    _argv: *mut *mut c_char,
    ver: *mut f32,
) -> c_int {
    zoltan_guard(None, "Zoltan_Initialize", || {
        if !ver.is_null() {
            // SAFETY: non-null and writable (the caller's contract).
            unsafe { ver.write(ZOLTAN_VERSION_NUMBER) };
        }
        if !comm::mpi_is_initialized() {
            return Err(Error::Unsupported(
                "MPI is not initialised: call MPI_Init before Zoltan_Initialize (zoltan-drum \
                 does not initialise MPI)"
                    .into(),
            ));
        }
        Ok(Done::Ok)
    })
}

/// `Zoltan_Create`: a Zoltan structure on (a duplicate of) the caller's communicator, with
/// Zoltan's default parameters; NULL on failure (the message is on stderr).
///
/// # Safety
/// `communicator` is a live communicator handle of this process's MPI.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn Zoltan_Create(communicator: RawComm) -> *mut ZoltanStruct {
    let mut out = std::ptr::null_mut();
    zoltan_guard(None, "Zoltan_Create", || {
        // SAFETY: the caller's contract.
        let comm = unsafe { MpiComm::from_raw(communicator) }?;
        out = Box::into_raw(Box::new(ZoltanStruct::new(comm)));
        Ok(Done::Ok)
    });
    out
}

/// `Zoltan_Destroy`: stops DRUM's agent, frees the structure, sets `*zz` to NULL.
///
/// # Safety
/// `zz` is NULL or points to NULL or to a live structure, not used afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn Zoltan_Destroy(zz: *mut *mut ZoltanStruct) {
    // SAFETY: the caller's contract.
    let Some(slot) = (unsafe { zz.as_mut() }) else {
        return;
    };
    let p = std::mem::replace(slot, std::ptr::null_mut());
    if p.is_null() {
        return;
    }
    // SAFETY: a live structure from Zoltan_Create, freed once.
    let b = unsafe { Box::from_raw(p) };
    let rank = b.rank();
    zoltan_guard(Some(rank), "Zoltan_Destroy", move || {
        let mut b = b;
        if let Some(d) = b.drum.take() {
            d.stop()?;
        }
        drop(b);
        Ok(Done::Ok)
    });
}

/// `Zoltan_Set_Param`: see the README's table of parameters.
///
/// # Safety
/// `zz` is NULL or live; `name` and `val` are NULL or NUL-terminated strings.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn Zoltan_Set_Param(
    zz: *mut ZoltanStruct,
    name: *const c_char,
    val: *const c_char,
) -> c_int {
    // SAFETY: `zz` is NULL or live (the caller's contract).
    unsafe { Zz::new(zz) }.run("Zoltan_Set_Param", |zz| {
        let text = |p: *const c_char, what| -> Result<String, Error> {
            if p.is_null() {
                return Err(Error::Null(what));
            }
            // SAFETY: non-NULL and NUL-terminated (the caller's contract).
            Ok(unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
        };
        zz.set_param(&text(name, "the name")?, &text(val, "the value")?)
    })
}

macro_rules! setter {
    ($(#[$doc:meta])* $name:ident, $ty:ty, $field:ident) => {
        $(#[$doc])*
        ///
        /// # Safety
        /// `zz` is NULL or live; `fn_ptr` is NULL (unregisters) or a function of the
        /// declared type, callable with `data_ptr` until replaced or the structure is
        /// destroyed.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $name(
            zz: *mut ZoltanStruct,
            fn_ptr: Option<$ty>,
            data_ptr: *mut c_void,
        ) -> c_int {
            // SAFETY: `zz` is NULL or live (the caller's contract).
            unsafe { Zz::new(zz) }.run(stringify!($name), |zz| {
                zz.cb.$field = fn_ptr.map(|f| Registered { f, data: data_ptr });
                Ok(Done::Ok)
            })
        }
    };
}

setter!(
    /// `Zoltan_Set_Num_Obj_Fn`: the number of this process's objects.
    Zoltan_Set_Num_Obj_Fn, ZoltanNumObjFn, num_obj
);
setter!(
    /// `Zoltan_Set_Obj_List_Fn`: their ids and weights.
    Zoltan_Set_Obj_List_Fn, ZoltanObjListFn, obj_list
);
setter!(
    /// `Zoltan_Set_Num_Geom_Fn`: coordinates per object.
    Zoltan_Set_Num_Geom_Fn, ZoltanNumGeomFn, num_geom
);
setter!(
    /// `Zoltan_Set_Geom_Multi_Fn`: every object's coordinates in one call.
    Zoltan_Set_Geom_Multi_Fn, ZoltanGeomMultiFn, geom_multi
);
setter!(
    /// `Zoltan_Set_Geom_Fn`: one object's coordinates (used without a multi function).
    Zoltan_Set_Geom_Fn, ZoltanGeomFn, geom
);
setter!(
    /// `Zoltan_Set_Obj_Size_Fn`: bytes to migrate one object.
    Zoltan_Set_Obj_Size_Fn, ZoltanObjSizeFn, obj_size
);
setter!(
    /// `Zoltan_Set_Obj_Size_Multi_Fn`: bytes to migrate each of a list of objects.
    Zoltan_Set_Obj_Size_Multi_Fn, ZoltanObjSizeMultiFn, obj_size_multi
);
setter!(
    /// `Zoltan_Set_Pack_Obj_Fn`: packs one object.
    Zoltan_Set_Pack_Obj_Fn, ZoltanPackObjFn, pack
);
setter!(
    /// `Zoltan_Set_Pack_Obj_Multi_Fn`: packs a list of objects.
    Zoltan_Set_Pack_Obj_Multi_Fn, ZoltanPackObjMultiFn, pack_multi
);
setter!(
    /// `Zoltan_Set_Unpack_Obj_Fn`: unpacks one object.
    Zoltan_Set_Unpack_Obj_Fn, ZoltanUnpackObjFn, unpack
);
setter!(
    /// `Zoltan_Set_Unpack_Obj_Multi_Fn`: unpacks a list of objects.
    Zoltan_Set_Unpack_Obj_Multi_Fn, ZoltanUnpackObjMultiFn, unpack_multi
);
setter!(
    /// `Zoltan_Set_Pre_Migrate_PP_Fn`: called before packing, with both lists.
    Zoltan_Set_Pre_Migrate_PP_Fn, ZoltanPreMigratePpFn, pre_migrate
);
setter!(
    /// `Zoltan_Set_Mid_Migrate_PP_Fn`: called after sending, before unpacking.
    Zoltan_Set_Mid_Migrate_PP_Fn, ZoltanMidMigratePpFn, mid_migrate
);
setter!(
    /// `Zoltan_Set_Post_Migrate_PP_Fn`: called after unpacking.
    Zoltan_Set_Post_Migrate_PP_Fn, ZoltanPostMigratePpFn, post_migrate
);

/// `Zoltan_LB_Set_Part_Sizes`: records relative part sizes on this process (`len = -1`
/// clears them); `Zoltan_LB_Partition` combines what every process set (Zoltan's rule: the
/// largest value given for a part, 1 for a part nobody set). Sizes for weight indices above
/// 0 are kept and not used (one weight per object is balanced).
///
/// # Safety
/// `zz` is NULL or live; with `len > 0`, `part_ids` and `part_sizes` hold `len` values and
/// `wgt_idx` is NULL or holds `len` values.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn Zoltan_LB_Set_Part_Sizes(
    zz: *mut ZoltanStruct,
    global_num: c_int,
    len: c_int,
    part_ids: *mut c_int,
    wgt_idx: *mut c_int,
    part_sizes: *mut f32,
) -> c_int {
    // SAFETY: `zz` is NULL or live (the caller's contract).
    unsafe { Zz::new(zz) }.run("Zoltan_LB_Set_Part_Sizes", |zz| {
        if len == -1 {
            zz.part_sizes.clear();
            return Ok(Done::Ok);
        }
        let n = count("len", len)?;
        if n > 0 && (part_ids.is_null() || part_sizes.is_null()) {
            return Err(Error::Null("part_ids or part_sizes"));
        }
        for i in 0..n {
            // SAFETY: i < n, and both arrays hold n values (the caller's contract).
            let (p, s) = unsafe { (*part_ids.add(i), *part_sizes.add(i)) };
            let w = if wgt_idx.is_null() {
                0
            } else {
                // SAFETY: i < n, and a non-NULL wgt_idx holds n values (the caller's contract).
                unsafe { *wgt_idx.add(i) }
            };
            let part = count("a part id", p)?;
            let weight_index = count("a weight index", w)?;
            if !(s.is_finite() && s >= 0.0) {
                return Err(Error::BadInput(format!(
                    "part_sizes[{i}] is {s}; sizes must be finite and non-negative"
                )));
            }
            zz.part_sizes.push(crate::zz::PartSize {
                global: global_num != 0,
                part,
                weight_index,
                size: s,
            });
        }
        Ok(Done::Ok)
    })
}

/// Where `Zoltan_LB_Partition` writes its results (all pointers checked non-NULL).
struct Outputs {
    changes: *mut c_int,
    num_gid: *mut c_int,
    num_lid: *mut c_int,
    import: ListOut,
    export: ListOut,
}

/// One list's output pointers (`to_part` NULL for `Zoltan_LB_Balance`).
struct ListOut {
    num: *mut c_int,
    gids: *mut ZoltanIdPtr,
    lids: *mut ZoltanIdPtr,
    procs: *mut *mut c_int,
    to_part: *mut *mut c_int,
}

impl Outputs {
    /// The output pointers, as the entry point got them.
    fn new(
        changes: *mut c_int,
        num_gid: *mut c_int,
        num_lid: *mut c_int,
        import: ListOut,
        export: ListOut,
    ) -> Outputs {
        Outputs {
            changes,
            num_gid,
            num_lid,
            import,
            export,
        }
    }
}

impl ListOut {
    /// A list's count and processes (the ids and parts NULL until set).
    fn new(num: *mut c_int, procs: *mut *mut c_int) -> ListOut {
        use std::ptr::null_mut;
        ListOut {
            num,
            gids: null_mut(),
            lids: null_mut(),
            procs,
            to_part: null_mut(),
        }
    }

    /// The list with its id arrays.
    fn ids(self, gids: *mut ZoltanIdPtr, lids: *mut ZoltanIdPtr) -> ListOut {
        ListOut { gids, lids, ..self }
    }

    /// The list with its part array.
    fn parts(self, to_part: *mut *mut c_int) -> ListOut {
        ListOut { to_part, ..self }
    }

    /// Hands the list (or −1 and NULLs) to the caller's pointers (its arrays, without a
    /// copy; the part array is freed when not asked for).
    ///
    /// # Safety
    /// The pointers are writable (`to_part` may be NULL).
    unsafe fn write(&self, l: Option<List>) -> Result<(), Error> {
        // SAFETY: the pointers are writable (the caller's contract); NULL is written first so
        // that a failure leaves nothing dangling.
        unsafe {
            *self.gids = std::ptr::null_mut();
            *self.lids = std::ptr::null_mut();
            *self.procs = std::ptr::null_mut();
            if !self.to_part.is_null() {
                *self.to_part = std::ptr::null_mut();
            }
            let Some(l) = l else {
                *self.num = -1;
                return Ok(());
            };
            *self.num = c_int::try_from(l.len())
                .map_err(|_| Error::BadInput("more than 2^31 objects in a list".into()))?;
            *self.gids = l.gids.into_raw();
            *self.lids = l.lids.into_raw();
            *self.procs = l.procs.into_raw();
            if !self.to_part.is_null() {
                *self.to_part = l.parts.into_raw();
            }
            Ok(())
        }
    }
}

/// The shared body of `Zoltan_LB_Partition` and `Zoltan_LB_Balance`.
fn partition(zz: &mut ZoltanStruct, out: &Outputs) -> Result<Done, Error> {
    zz.laps = Laps::start();
    let a = zz.assign()?;
    let (gid, lid) = (zz.params.num_gid, zz.params.num_lid);
    let l: Lists = lists(&zz.comm, &a, zz.params.return_lists, gid, lid, &mut zz.laps)?;
    if zz.params.auto_migrate {
        // Zoltan's AUTO_MIGRATE: the application's pack and unpack functions move the
        // objects before the lists are returned.
        zz.migrate(l.import.clone(), l.export.clone())?;
    }
    // SAFETY: `out`'s pointers were checked non-NULL by the caller.
    unsafe {
        *out.changes = c_int::from(l.changes);
        *out.num_gid = gid as c_int;
        *out.num_lid = lid as c_int;
        out.import.write(l.import)?;
        if let Err(e) = out.export.write(l.export) {
            free_list(&out.import);
            return Err(e);
        }
    }
    let warning = a.warning.clone();
    drop(a);
    zz.laps.lap("write+free");
    zz.laps.print(zz.rank());
    if zz.params.debug_level >= 1 && zz.rank() == 0 && !zz.params.given.is_empty() {
        let set: Vec<String> = zz
            .params
            .given
            .iter()
            .map(|(n, v)| format!("{n}={v}"))
            .collect();
        eprintln!("zoltan-drum: parameters set: {}", set.join(" "));
        zz.params.given.clear();
    }
    Ok(match warning {
        Some(w) if zz.rank() == 0 => Done::Warn(w),
        Some(_) => Done::Warn(String::new()),
        None => Done::Ok,
    })
}

/// Frees a list's arrays and sets their pointers to NULL (a NULL pointer is passed over).
///
/// # Safety
/// Each of the list's array pointers is NULL, or points to NULL or to an array from this
/// library not yet freed.
unsafe fn free_list(l: &ListOut) {
    // SAFETY: the caller's contract.
    unsafe {
        c_free(l.gids);
        c_free(l.lids);
        c_free(l.procs);
        c_free(l.to_part);
    }
}

/// `Zoltan_LB_Partition`: partitions the objects by `LB_METHOD` into `NUM_GLOBAL_PARTS`
/// parts and returns the lists `RETURN_LISTS` asks for (arrays allocated here, freed with
/// [`Zoltan_LB_Free_Part`]; a list not returned has count −1 and NULL arrays). Collective.
///
/// # Safety
/// `zz` is NULL or live; every other pointer is writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn Zoltan_LB_Partition(
    zz: *mut ZoltanStruct,
    changes: *mut c_int,
    num_gid_entries: *mut c_int,
    num_lid_entries: *mut c_int,
    num_import: *mut c_int,
    import_global_ids: *mut ZoltanIdPtr,
    import_local_ids: *mut ZoltanIdPtr,
    import_procs: *mut *mut c_int,
    import_to_part: *mut *mut c_int,
    num_export: *mut c_int,
    export_global_ids: *mut ZoltanIdPtr,
    export_local_ids: *mut ZoltanIdPtr,
    export_procs: *mut *mut c_int,
    export_to_part: *mut *mut c_int,
) -> c_int {
    let import = ListOut::new(num_import, import_procs)
        .ids(import_global_ids, import_local_ids)
        .parts(import_to_part);
    let export = ListOut::new(num_export, export_procs)
        .ids(export_global_ids, export_local_ids)
        .parts(export_to_part);
    let out = Outputs::new(changes, num_gid_entries, num_lid_entries, import, export);
    // SAFETY: `zz` is NULL or live (the caller's contract).
    unsafe { lb(zz, "Zoltan_LB_Partition", out, true) }
}

/// The shared body of [`Zoltan_LB_Partition`] and [`Zoltan_LB_Balance`] (`parts`: whether the
/// part arrays are asked for).
///
/// # Safety
/// `zz` is NULL or live.
unsafe fn lb(zz: *mut ZoltanStruct, function: &str, out: Outputs, parts: bool) -> c_int {
    // SAFETY: `zz` is NULL or live (the caller's contract).
    unsafe { Zz::new(zz) }.run(function, |zz| {
        check_outputs(&out, parts)?;
        partition(zz, &out)
    })
}

fn check_outputs(o: &Outputs, parts: bool) -> Result<(), Error> {
    let ptrs: [(*const (), &'static str); 8] = [
        (o.changes.cast(), "changes"),
        (o.num_gid.cast(), "num_gid_entries"),
        (o.num_lid.cast(), "num_lid_entries"),
        (o.import.num.cast(), "num_import"),
        (o.import.gids.cast(), "import_global_ids"),
        (o.import.lids.cast(), "import_local_ids"),
        (o.import.procs.cast(), "import_procs"),
        (o.export.num.cast(), "num_export"),
    ];
    let more: [(*const (), &'static str); 3] = [
        (o.export.gids.cast(), "export_global_ids"),
        (o.export.lids.cast(), "export_local_ids"),
        (o.export.procs.cast(), "export_procs"),
    ];
    if let Some((_, what)) = ptrs.iter().chain(&more).find(|(p, _)| p.is_null()) {
        return Err(Error::Null(what));
    }
    if parts && (o.import.to_part.is_null() || o.export.to_part.is_null()) {
        return Err(Error::Null("import_to_part or export_to_part"));
    }
    Ok(())
}

/// `Zoltan_LB_Balance`: [`Zoltan_LB_Partition`] without the part arrays (parts are
/// processes). Free the lists with `Zoltan_LB_Free_Part` (two NULL part pointers).
///
/// # Safety
/// `zz` is NULL or live; every other pointer is writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn Zoltan_LB_Balance(
    zz: *mut ZoltanStruct,
    changes: *mut c_int,
    num_gid_entries: *mut c_int,
    num_lid_entries: *mut c_int,
    num_import: *mut c_int,
    import_global_ids: *mut ZoltanIdPtr,
    import_local_ids: *mut ZoltanIdPtr,
    import_procs: *mut *mut c_int,
    num_export: *mut c_int,
    export_global_ids: *mut ZoltanIdPtr,
    export_local_ids: *mut ZoltanIdPtr,
    export_procs: *mut *mut c_int,
) -> c_int {
    let import = ListOut::new(num_import, import_procs).ids(import_global_ids, import_local_ids);
    let export = ListOut::new(num_export, export_procs).ids(export_global_ids, export_local_ids);
    let out = Outputs::new(changes, num_gid_entries, num_lid_entries, import, export);
    // SAFETY: `zz` is NULL or live (the caller's contract).
    unsafe { lb(zz, "Zoltan_LB_Balance", out, false) }
}

/// `Zoltan_LB_Free_Part`: frees arrays returned by [`Zoltan_LB_Partition`] and sets the
/// pointers to NULL; NULL arguments are fine.
///
/// # Safety
/// Each argument is NULL or points to NULL or to an array from this library not yet freed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn Zoltan_LB_Free_Part(
    global_ids: *mut ZoltanIdPtr,
    local_ids: *mut ZoltanIdPtr,
    procs: *mut *mut c_int,
    to_part: *mut *mut c_int,
) -> c_int {
    let l = ListOut::new(std::ptr::null_mut(), procs)
        .ids(global_ids, local_ids)
        .parts(to_part);
    // SAFETY: each is NULL, or points to NULL or to an array from this library not yet freed
    // (the caller's contract).
    let _ = catch_unwind(AssertUnwindSafe(|| unsafe { free_list(&l) }));
    ZOLTAN_OK
}

/// Copies a list given by the application (`num == -1`: not given).
///
/// # Safety
/// With `num > 0` the arrays are NULL or hold `num` entries (ids: `num` times the id
/// length).
unsafe fn list_in(
    zz: &ZoltanStruct,
    num: c_int,
    arrays: (ZoltanIdPtr, ZoltanIdPtr, *mut c_int, *mut c_int),
) -> Result<Option<List>, Error> {
    if num == -1 {
        return Ok(None);
    }
    let n = count("a list's count", num)?;
    let (gid, lid) = (zz.params.num_gid, zz.params.num_lid);
    let (g, l, p, t) = arrays;
    if n > 0 && (g.is_null() || p.is_null() || (lid > 0 && l.is_null())) {
        return Err(Error::Null("a list's global ids, local ids or processes"));
    }
    let copy = |ptr: *mut u32, len: usize| -> Result<CBuf<u32>, Error> {
        if len == 0 || ptr.is_null() {
            CBuf::zeroed(len)
        } else {
            // SAFETY: non-NULL, and holds len values (the caller's contract).
            CBuf::from_slice(unsafe { std::slice::from_raw_parts(ptr, len) })
        }
    };
    let procs: Vec<c_int> = if n == 0 {
        Vec::new()
    } else {
        // SAFETY: n > 0, so p is non-NULL (checked above) and holds n values (the caller's contract).
        unsafe { std::slice::from_raw_parts(p, n) }.to_vec()
    };
    let size = zz.comm.size() as c_int;
    if let Some(i) = procs.iter().position(|&r| !(0..size).contains(&r)) {
        return Err(Error::BadInput(format!(
            "a list's entry {i} names process {}, not one of the {size}",
            procs[i]
        )));
    }
    let parts = if t.is_null() || n == 0 {
        procs.clone()
    } else {
        // SAFETY: non-NULL, and holds n values (the caller's contract).
        unsafe { std::slice::from_raw_parts(t, n) }.to_vec()
    };
    Ok(Some(List {
        gids: copy(g, n * gid)?,
        lids: copy(l, n * lid)?,
        procs: CBuf::from_slice(&procs)?,
        parts: CBuf::from_slice(&parts)?,
    }))
}

/// `Zoltan_Migrate`: moves the objects of the export lists (or, where those are −1, of the
/// import lists) to their new processes through the registered size, pack and unpack
/// functions, with the pre-, mid- and post-migrate functions if registered. With
/// `MIGRATE_ONLY_PROC_CHANGES=1` (the default) objects that stay on their process are not
/// packed. Collective.
///
/// # Safety
/// `zz` is NULL or live; each list is −1 or its arrays hold its count of entries.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn Zoltan_Migrate(
    zz: *mut ZoltanStruct,
    num_import: c_int,
    import_global_ids: ZoltanIdPtr,
    import_local_ids: ZoltanIdPtr,
    import_procs: *mut c_int,
    import_to_part: *mut c_int,
    num_export: c_int,
    export_global_ids: ZoltanIdPtr,
    export_local_ids: ZoltanIdPtr,
    export_procs: *mut c_int,
    export_to_part: *mut c_int,
) -> c_int {
    // SAFETY: `zz` is NULL or live (the caller's contract).
    unsafe { Zz::new(zz) }.run("Zoltan_Migrate", |zz| {
        // SAFETY: the import list is -1 or its arrays hold its count (the caller's contract).
        let im = unsafe {
            list_in(
                zz,
                num_import,
                (
                    import_global_ids,
                    import_local_ids,
                    import_procs,
                    import_to_part,
                ),
            )
        };
        // SAFETY: the export list is -1 or its arrays hold its count (the caller's contract).
        let ex = unsafe {
            list_in(
                zz,
                num_export,
                (
                    export_global_ids,
                    export_local_ids,
                    export_procs,
                    export_to_part,
                ),
            )
        };
        let lists = zz.agreed(im.and_then(|im| ex.map(|ex| (im, ex))))?;
        zz.migrate(lists.0, lists.1)?;
        Ok(Done::Ok)
    })
}

/// The kept cuts, or the error Zoltan gives without them.
fn kept<'a>(zz: &'a ZoltanStruct, what: &str) -> Result<&'a crate::zz::Kept, Error> {
    let kept = zz.kept.as_ref().filter(|_| zz.params.keep_cuts);
    match kept {
        Some(k) if matches!(k.cuts, Cuts::Hier(_)) => Err(Error::Unsupported(format!(
            "{what} is not supported by LB_METHOD HIER (as in Zoltan)"
        ))),
        Some(k) => Ok(k),
        None => Err(Error::BadInput(format!(
            "{what}: no decomposition data available; set KEEP_CUTS=1 before \
             Zoltan_LB_Partition"
        ))),
    }
}

/// The part of a point under the kept cuts.
fn point_part(zz: &ZoltanStruct, coords: *const f64) -> Result<(usize, usize), Error> {
    let k = kept(zz, "Point_Assign")?;
    if coords.is_null() {
        return Err(Error::Null("coords"));
    }
    // SAFETY: the caller passes the partition's dim coordinates.
    let x = unsafe { std::slice::from_raw_parts(coords, k.dim) };
    let part = match &k.cuts {
        Cuts::Hsfc(p) => p.point_assign(x)? as usize,
        Cuts::Bisection(b) => b.point_assign(x) as usize,
        Cuts::Hier(_) => unreachable!("kept() refuses HIER"),
    };
    Ok((part, k.dist.proc_of(part, None, zz.rank())))
}

/// `Zoltan_LB_Point_PP_Assign`: the process and part of a point under the last partition
/// (`KEEP_CUTS=1`; HSFC, RCB, RIB). `coords` holds the partition's dimension of values.
///
/// # Safety
/// `zz` is NULL or live; `coords` is NULL or holds dim values; `proc` and `part` are NULL or
/// writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn Zoltan_LB_Point_PP_Assign(
    zz: *mut ZoltanStruct,
    coords: *mut f64,
    proc: *mut c_int,
    part: *mut c_int,
) -> c_int {
    // SAFETY: `zz` is NULL or live (the caller's contract).
    unsafe { Zz::new(zz) }.run("Zoltan_LB_Point_PP_Assign", |zz| {
        let (p, r) = point_part(zz, coords)?;
        if proc.is_null() || part.is_null() {
            return Err(Error::Null("proc or part"));
        }
        // SAFETY: checked non-NULL above, and writable (the caller's contract).
        unsafe {
            *proc = r as c_int;
            *part = p as c_int;
        }
        Ok(Done::Ok)
    })
}

/// `Zoltan_LB_Point_Assign`: the process of a point, when parts are processes.
///
/// # Safety
/// As [`Zoltan_LB_Point_PP_Assign`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn Zoltan_LB_Point_Assign(
    zz: *mut ZoltanStruct,
    coords: *mut f64,
    proc: *mut c_int,
) -> c_int {
    // SAFETY: `zz` is NULL or live (the caller's contract).
    unsafe { Zz::new(zz) }.run("Zoltan_LB_Point_Assign", |zz| {
        if zz.kept.as_ref().is_some_and(|k| !k.dist.identity) {
            return Err(Error::BadInput(
                "parts are not processes (NUM_GLOBAL_PARTS or NUM_LOCAL_PARTS is set): use \
                 Zoltan_LB_Point_PP_Assign"
                    .into(),
            ));
        }
        let (_, r) = point_part(zz, coords)?;
        if proc.is_null() {
            return Err(Error::Null("proc"));
        }
        // SAFETY: checked non-NULL above, and writable (the caller's contract).
        unsafe { *proc = r as c_int };
        Ok(Done::Ok)
    })
}

/// The parts and processes whose regions meet a box (z ignored in 2-D, y and z in 1-D).
fn box_parts(
    zz: &ZoltanStruct,
    lo: [f64; 3],
    hi: [f64; 3],
) -> Result<(Vec<c_int>, Vec<c_int>), Error> {
    let k = kept(zz, "Box_Assign")?;
    let (lo, hi) = (&lo[..k.dim], &hi[..k.dim]);
    let mut parts = Vec::new();
    match &k.cuts {
        Cuts::Hsfc(p) => p.box_assign(lo, hi, &mut parts)?,
        Cuts::Bisection(b) => {
            if lo.iter().chain(hi).any(|x| !x.is_finite()) || lo.iter().zip(hi).any(|(a, b)| a > b)
            {
                return Err(Error::BadInput(format!(
                    "Box_Assign: the box {lo:?} to {hi:?} is not finite or has lo > hi"
                )));
            }
            b.box_assign(lo, hi, &mut parts)
        }
        Cuts::Hier(_) => unreachable!("kept() refuses HIER"),
    }
    let mut procs: Vec<c_int> = parts
        .iter()
        .flat_map(|&p| k.dist.procs_of(p as usize))
        .map(|r| r as c_int)
        .collect();
    procs.sort_unstable();
    procs.dedup();
    Ok((parts.into_iter().map(|p| p as c_int).collect(), procs))
}

/// # Safety
/// `out` is NULL or holds `v.len()` writable values; `n` is NULL or writable.
unsafe fn write_all(
    v: &[c_int],
    out: *mut c_int,
    n: *mut c_int,
    what: &'static str,
) -> Result<(), Error> {
    if out.is_null() || n.is_null() {
        return Err(Error::Null(what));
    }
    // SAFETY: the caller's contract (Zoltan: "the calling routine ensures sufficient space").
    unsafe {
        std::ptr::copy_nonoverlapping(v.as_ptr(), out, v.len());
        *n = v.len() as c_int;
    }
    Ok(())
}

/// `Zoltan_LB_Box_PP_Assign`: the processes and parts whose regions meet the box
/// (`KEEP_CUTS=1`; HSFC, RCB, RIB): every point of the box lies in one of the parts listed.
/// `procs` must hold the process count and `parts` the part count.
///
/// # Safety
/// `zz` is NULL or live; the arrays are NULL or large enough; the counts NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn Zoltan_LB_Box_PP_Assign(
    zz: *mut ZoltanStruct,
    xmin: f64,
    ymin: f64,
    zmin: f64,
    xmax: f64,
    ymax: f64,
    zmax: f64,
    procs: *mut c_int,
    numprocs: *mut c_int,
    parts: *mut c_int,
    numparts: *mut c_int,
) -> c_int {
    // SAFETY: `zz` is NULL or live (the caller's contract).
    unsafe { Zz::new(zz) }.run("Zoltan_LB_Box_PP_Assign", |zz| {
        let (pa, pr) = box_parts(zz, [xmin, ymin, zmin], [xmax, ymax, zmax])?;
        // SAFETY: procs and parts are NULL or hold the process and part counts, numprocs and numparts NULL or writable (the caller's contract).
        unsafe {
            write_all(&pr, procs, numprocs, "procs or numprocs")?;
            write_all(&pa, parts, numparts, "parts or numparts")?;
        }
        Ok(Done::Ok)
    })
}

/// `Zoltan_LB_Box_Assign`: the processes whose regions meet the box.
///
/// # Safety
/// As [`Zoltan_LB_Box_PP_Assign`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn Zoltan_LB_Box_Assign(
    zz: *mut ZoltanStruct,
    xmin: f64,
    ymin: f64,
    zmin: f64,
    xmax: f64,
    ymax: f64,
    zmax: f64,
    procs: *mut c_int,
    numprocs: *mut c_int,
) -> c_int {
    // SAFETY: `zz` is NULL or live (the caller's contract).
    unsafe { Zz::new(zz) }.run("Zoltan_LB_Box_Assign", |zz| {
        let (_, pr) = box_parts(zz, [xmin, ymin, zmin], [xmax, ymax, zmax])?;
        // SAFETY: procs is NULL or holds the process count, numprocs NULL or writable (the caller's contract).
        unsafe { write_all(&pr, procs, numprocs, "procs or numprocs") }?;
        Ok(Done::Ok)
    })
}
