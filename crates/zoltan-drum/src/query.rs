//! The application's query functions (Zoltan's `ZOLTAN_*_FN` types, with Zoltan's C
//! signatures), and the one place they are called to learn the objects: ids, weights,
//! coordinates.

use crate::error::Error;
use std::ffi::{c_char, c_int, c_void};

/// `ZOLTAN_ID_TYPE`: one word of a global or local id (`unsigned int`, Zoltan's default and
/// Debian's build).
pub type ZoltanIdType = u32;
/// `ZOLTAN_ID_PTR`.
pub type ZoltanIdPtr = *mut ZoltanIdType;

/// `ZOLTAN_NUM_OBJ_FN`.
pub type ZoltanNumObjFn = unsafe extern "C" fn(data: *mut c_void, ierr: *mut c_int) -> c_int;
/// `ZOLTAN_OBJ_LIST_FN`.
pub type ZoltanObjListFn = unsafe extern "C" fn(
    data: *mut c_void,
    num_gid_entries: c_int,
    num_lid_entries: c_int,
    global_ids: ZoltanIdPtr,
    local_ids: ZoltanIdPtr,
    wdim: c_int,
    objwgts: *mut f32,
    ierr: *mut c_int,
);
/// `ZOLTAN_NUM_GEOM_FN`.
pub type ZoltanNumGeomFn = unsafe extern "C" fn(data: *mut c_void, ierr: *mut c_int) -> c_int;
/// `ZOLTAN_GEOM_MULTI_FN`.
pub type ZoltanGeomMultiFn = unsafe extern "C" fn(
    data: *mut c_void,
    num_gid_entries: c_int,
    num_lid_entries: c_int,
    num_obj: c_int,
    global_ids: ZoltanIdPtr,
    local_ids: ZoltanIdPtr,
    num_dim: c_int,
    geom_vec: *mut f64,
    ierr: *mut c_int,
);
/// `ZOLTAN_GEOM_FN`.
pub type ZoltanGeomFn = unsafe extern "C" fn(
    data: *mut c_void,
    num_gid_entries: c_int,
    num_lid_entries: c_int,
    global_id: ZoltanIdPtr,
    local_id: ZoltanIdPtr,
    geom_vec: *mut f64,
    ierr: *mut c_int,
);
/// `ZOLTAN_OBJ_SIZE_FN`.
pub type ZoltanObjSizeFn = unsafe extern "C" fn(
    data: *mut c_void,
    num_gid_entries: c_int,
    num_lid_entries: c_int,
    global_id: ZoltanIdPtr,
    local_id: ZoltanIdPtr,
    ierr: *mut c_int,
) -> c_int;
/// `ZOLTAN_OBJ_SIZE_MULTI_FN`.
pub type ZoltanObjSizeMultiFn = unsafe extern "C" fn(
    data: *mut c_void,
    num_gid_entries: c_int,
    num_lid_entries: c_int,
    num_ids: c_int,
    global_ids: ZoltanIdPtr,
    local_ids: ZoltanIdPtr,
    num_bytes: *mut c_int,
    ierr: *mut c_int,
);
/// `ZOLTAN_PACK_OBJ_FN`.
pub type ZoltanPackObjFn = unsafe extern "C" fn(
    data: *mut c_void,
    num_gid_entries: c_int,
    num_lid_entries: c_int,
    global_id: ZoltanIdPtr,
    local_id: ZoltanIdPtr,
    dest_proc: c_int,
    size: c_int,
    buf: *mut c_char,
    ierr: *mut c_int,
);
/// `ZOLTAN_PACK_OBJ_MULTI_FN`.
pub type ZoltanPackObjMultiFn = unsafe extern "C" fn(
    data: *mut c_void,
    num_gid_entries: c_int,
    num_lid_entries: c_int,
    num_ids: c_int,
    global_ids: ZoltanIdPtr,
    local_ids: ZoltanIdPtr,
    dest_proc: *mut c_int,
    size: *mut c_int,
    index: *mut c_int,
    buffer: *mut c_char,
    ierr: *mut c_int,
);
/// `ZOLTAN_UNPACK_OBJ_FN`.
pub type ZoltanUnpackObjFn = unsafe extern "C" fn(
    data: *mut c_void,
    num_gid_entries: c_int,
    global_id: ZoltanIdPtr,
    size: c_int,
    buf: *mut c_char,
    ierr: *mut c_int,
);
/// `ZOLTAN_UNPACK_OBJ_MULTI_FN`.
pub type ZoltanUnpackObjMultiFn = unsafe extern "C" fn(
    data: *mut c_void,
    num_gid_entries: c_int,
    num_ids: c_int,
    global_ids: ZoltanIdPtr,
    size: *mut c_int,
    index: *mut c_int,
    buffer: *mut c_char,
    ierr: *mut c_int,
);
/// `ZOLTAN_PRE_MIGRATE_PP_FN`, `ZOLTAN_MID_MIGRATE_PP_FN` and `ZOLTAN_POST_MIGRATE_PP_FN`
/// (one signature).
pub type ZoltanMigratePpFn = unsafe extern "C" fn(
    data: *mut c_void,
    num_gid_entries: c_int,
    num_lid_entries: c_int,
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
    ierr: *mut c_int,
);

/// `ZOLTAN_PRE_MIGRATE_PP_FN`.
pub type ZoltanPreMigratePpFn = ZoltanMigratePpFn;
/// `ZOLTAN_MID_MIGRATE_PP_FN`.
pub type ZoltanMidMigratePpFn = ZoltanMigratePpFn;
/// `ZOLTAN_POST_MIGRATE_PP_FN`.
pub type ZoltanPostMigratePpFn = ZoltanMigratePpFn;

/// A registered query function with its data pointer.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Registered<F> {
    pub f: F,
    pub data: *mut c_void,
}

/// Every query function the application registered.
#[derive(Debug, Default, Clone)]
pub(crate) struct Callbacks {
    pub num_obj: Option<Registered<ZoltanNumObjFn>>,
    pub obj_list: Option<Registered<ZoltanObjListFn>>,
    pub num_geom: Option<Registered<ZoltanNumGeomFn>>,
    pub geom_multi: Option<Registered<ZoltanGeomMultiFn>>,
    pub geom: Option<Registered<ZoltanGeomFn>>,
    pub obj_size: Option<Registered<ZoltanObjSizeFn>>,
    pub obj_size_multi: Option<Registered<ZoltanObjSizeMultiFn>>,
    pub pack: Option<Registered<ZoltanPackObjFn>>,
    pub pack_multi: Option<Registered<ZoltanPackObjMultiFn>>,
    pub unpack: Option<Registered<ZoltanUnpackObjFn>>,
    pub unpack_multi: Option<Registered<ZoltanUnpackObjMultiFn>>,
    pub pre_migrate: Option<Registered<ZoltanMigratePpFn>>,
    pub mid_migrate: Option<Registered<ZoltanMigratePpFn>>,
    pub post_migrate: Option<Registered<ZoltanMigratePpFn>>,
}

/// Turns a query function's `ierr` into a result (`ZOLTAN_OK` and `ZOLTAN_WARN` pass).
pub(crate) fn check_ierr(what: &'static str, ierr: c_int) -> Result<(), Error> {
    match ierr {
        0 | 1 => Ok(()),
        code => Err(Error::Callback { what, code }),
    }
}

/// A count from C as a `usize`, or an error naming it.
pub(crate) fn count(what: &str, n: c_int) -> Result<usize, Error> {
    usize::try_from(n).map_err(|_| Error::BadInput(format!("{what} is negative ({n})")))
}

/// This process's objects, as the query functions gave them.
#[derive(Debug, Default, Clone)]
pub(crate) struct Objects {
    /// Number of objects.
    pub n: usize,
    /// `n · num_gid` words.
    pub gids: Vec<ZoltanIdType>,
    /// `n · num_lid` words.
    pub lids: Vec<ZoltanIdType>,
    /// `n · wdim` weights.
    pub weights: Vec<f32>,
    /// `n · dim` coordinates.
    pub coords: Vec<f64>,
    /// Coordinates per object (from `ZOLTAN_NUM_GEOM_FN`).
    pub dim: usize,
}

/// The id layout and weight count the queries use.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Layout {
    pub num_gid: usize,
    pub num_lid: usize,
    pub wdim: usize,
}

fn as_int(what: &str, x: usize) -> Result<c_int, Error> {
    c_int::try_from(x).map_err(|_| Error::BadInput(format!("{what} = {x} exceeds a C int")))
}

impl Callbacks {
    /// Asks the application for its objects: `ZOLTAN_NUM_OBJ_FN`, `ZOLTAN_OBJ_LIST_FN`
    /// (ids and `wdim` weights), and with `geometry` `ZOLTAN_NUM_GEOM_FN` and
    /// `ZOLTAN_GEOM_MULTI_FN` (else `ZOLTAN_GEOM_FN` per object).
    pub(crate) fn objects(&self, layout: Layout, geometry: bool) -> Result<Objects, Error> {
        let num_obj = self.num_obj.ok_or(Error::NoCallback {
            what: "ZOLTAN_NUM_OBJ_FN",
            setter: "Zoltan_Set_Num_Obj_Fn",
        })?;
        let mut ierr = 0;
        // SAFETY: the application registered this function for this data pointer.
        let n = unsafe { (num_obj.f)(num_obj.data, &mut ierr) };
        check_ierr("ZOLTAN_NUM_OBJ_FN", ierr)?;
        let n = count("the number of objects (ZOLTAN_NUM_OBJ_FN)", n)?;
        let (g, l, w) = (
            as_int("NUM_GID_ENTRIES", layout.num_gid)?,
            as_int("NUM_LID_ENTRIES", layout.num_lid)?,
            as_int("OBJ_WEIGHT_DIM", layout.wdim)?,
        );
        let mut o = Objects {
            n,
            gids: vec![0; n * layout.num_gid],
            lids: vec![0; n * layout.num_lid],
            weights: vec![0.0; n * layout.wdim],
            coords: Vec::new(),
            dim: 0,
        };
        let list = self.obj_list.ok_or(Error::NoCallback {
            what: "ZOLTAN_OBJ_LIST_FN",
            setter: "Zoltan_Set_Obj_List_Fn",
        })?;
        if n > 0 {
            let mut ierr = 0;
            // SAFETY: buffers of n·num_gid, n·num_lid and n·wdim values, as Zoltan passes.
            unsafe {
                (list.f)(
                    list.data,
                    g,
                    l,
                    o.gids.as_mut_ptr(),
                    o.lids.as_mut_ptr(),
                    w,
                    o.weights.as_mut_ptr(),
                    &mut ierr,
                )
            };
            check_ierr("ZOLTAN_OBJ_LIST_FN", ierr)?;
        }
        if let Some((i, x)) = o
            .weights
            .iter()
            .enumerate()
            .find(|(_, x)| !(x.is_finite() && **x >= 0.0))
        {
            return Err(Error::BadInput(format!(
                "object {} (local index): weight {} is {x}; weights must be finite and \
                 non-negative",
                i / layout.wdim.max(1),
                i % layout.wdim.max(1)
            )));
        }
        if geometry {
            self.geometry(&mut o, layout)?;
        }
        Ok(o)
    }

    fn geometry(&self, o: &mut Objects, layout: Layout) -> Result<(), Error> {
        let num_geom = self.num_geom.ok_or(Error::NoCallback {
            what: "ZOLTAN_NUM_GEOM_FN",
            setter: "Zoltan_Set_Num_Geom_Fn",
        })?;
        let mut ierr = 0;
        // SAFETY: the application's function for its data pointer.
        let dim = unsafe { (num_geom.f)(num_geom.data, &mut ierr) };
        check_ierr("ZOLTAN_NUM_GEOM_FN", ierr)?;
        let dim = count("the dimension (ZOLTAN_NUM_GEOM_FN)", dim)?;
        if !(1..=3).contains(&dim) {
            return Err(Error::BadInput(format!(
                "ZOLTAN_NUM_GEOM_FN returned {dim}: geometric methods take 1 to 3 coordinates"
            )));
        }
        o.dim = dim;
        o.coords = vec![0.0; o.n * dim];
        if o.n == 0 {
            return Ok(());
        }
        let (g, l) = (layout.num_gid as c_int, layout.num_lid as c_int);
        if let Some(multi) = self.geom_multi {
            let mut ierr = 0;
            // SAFETY: the ids of the n objects and a buffer of n·dim doubles.
            unsafe {
                (multi.f)(
                    multi.data,
                    g,
                    l,
                    as_int("the number of objects", o.n)?,
                    o.gids.as_mut_ptr(),
                    o.lids.as_mut_ptr(),
                    dim as c_int,
                    o.coords.as_mut_ptr(),
                    &mut ierr,
                )
            };
            check_ierr("ZOLTAN_GEOM_MULTI_FN", ierr)?;
        } else if let Some(single) = self.geom {
            for i in 0..o.n {
                let mut ierr = 0;
                // SAFETY: object i's ids and its dim doubles.
                unsafe {
                    (single.f)(
                        single.data,
                        g,
                        l,
                        o.gids.as_mut_ptr().add(i * layout.num_gid),
                        o.lids.as_mut_ptr().add(i * layout.num_lid),
                        o.coords.as_mut_ptr().add(i * dim),
                        &mut ierr,
                    )
                };
                check_ierr("ZOLTAN_GEOM_FN", ierr)?;
            }
        } else {
            return Err(Error::NoCallback {
                what: "ZOLTAN_GEOM_MULTI_FN or ZOLTAN_GEOM_FN",
                setter: "Zoltan_Set_Geom_Multi_Fn or Zoltan_Set_Geom_Fn",
            });
        }
        if let Some(i) = o.coords.iter().position(|x| !x.is_finite()) {
            return Err(Error::BadInput(format!(
                "object {} (local index): coordinate {} is {}; coordinates must be finite",
                i / dim,
                i % dim,
                o.coords[i]
            )));
        }
        Ok(())
    }
}
