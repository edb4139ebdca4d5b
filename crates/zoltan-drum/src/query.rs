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

impl<F: Copy> Registered<F> {
    /// Calls the application's function: `call` gets it, its data pointer and `ierr` (0
    /// before the call); an `ierr` other than `ZOLTAN_OK` or `ZOLTAN_WARN` is an error naming
    /// `what`.
    pub(crate) fn call<R>(
        self,
        what: &'static str,
        call: impl FnOnce(F, *mut c_void, &mut c_int) -> R,
    ) -> Result<R, Error> {
        let mut ierr = 0;
        let r = call(self.f, self.data, &mut ierr);
        check_ierr(what, ierr)?;
        Ok(r)
    }
}

/// The registered function, or the error naming it (`what`) and its `setter`.
fn required<F>(
    f: Option<Registered<F>>,
    what: &'static str,
    setter: &'static str,
) -> Result<Registered<F>, Error> {
    f.ok_or(Error::NoCallback { what, setter })
}

/// A query function in its two forms, as registered: `M` called once for a list of objects
/// (Zoltan's `ZOLTAN_*_MULTI_FN`), `S` once per object (`ZOLTAN_*_FN`). Built by [`forms!`].
pub(crate) struct Forms<M, S> {
    pub multi: Option<Registered<M>>,
    pub single: Option<Registered<S>>,
    /// Zoltan's names of the two forms, the multi form first.
    pub what: [&'static str; 2],
    /// The functions that register them.
    pub setter: [&'static str; 2],
}

/// The [`Forms`] of a query from two fields of [`Callbacks`], with Zoltan's names spelled
/// from their stems: `forms!(cb, geom_multi, geom, "GEOM", "Geom")` names
/// `ZOLTAN_GEOM_MULTI_FN` and `ZOLTAN_GEOM_FN`, set by `Zoltan_Set_Geom_Multi_Fn` and
/// `Zoltan_Set_Geom_Fn`.
macro_rules! forms {
    ($cb:expr, $multi:ident, $single:ident, $what:literal, $setter:literal) => {
        $crate::query::Forms {
            multi: $cb.$multi,
            single: $cb.$single,
            what: [
                concat!("ZOLTAN_", $what, "_MULTI_FN"),
                concat!("ZOLTAN_", $what, "_FN"),
            ],
            setter: [
                concat!("Zoltan_Set_", $setter, "_Multi_Fn"),
                concat!("Zoltan_Set_", $setter, "_Fn"),
            ],
        }
    };
}
pub(crate) use forms;

impl<M: Copy, S: Copy> Forms<M, S> {
    /// Calls the multi form once (`multi`), or else the single form once for each of `n`
    /// objects (`single`, with the object's index), each checked as [`Registered::call`]
    /// does; with neither registered, an error naming both when `needed`.
    pub(crate) fn call(
        &self,
        n: usize,
        needed: bool,
        multi: impl FnOnce(M, *mut c_void, &mut c_int),
        mut single: impl FnMut(usize, S, *mut c_void, &mut c_int),
    ) -> Result<(), Error> {
        if let Some(m) = self.multi {
            m.call(self.what[0], multi)
        } else if let Some(s) = self.single {
            (0..n).try_for_each(|i| s.call(self.what[1], |f, data, ierr| single(i, f, data, ierr)))
        } else if needed {
            Err(Error::NoForm {
                what: self.what,
                setter: self.setter,
            })
        } else {
            Ok(())
        }
    }
}

/// Calls a `ZOLTAN_NUM_OBJ_FN` or `ZOLTAN_NUM_GEOM_FN` (named `name`) for the count it
/// returns; `what` names the count in an error.
fn ask_count(
    f: Registered<ZoltanNumObjFn>,
    name: &'static str,
    what: &str,
) -> Result<usize, Error> {
    // SAFETY: the application registered this function for this data pointer.
    let n = f.call(name, |f, data, ierr| unsafe { f(data, ierr) })?;
    count(&format!("{what} ({name})"), n)
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

/// Whether [`Callbacks::objects`] asks for the objects' coordinates, and who checks that they
/// are finite.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Geometry {
    /// No coordinates (a method that does not use them).
    No,
    /// Coordinates, checked here.
    Checked,
    /// Coordinates for a partitioner that checks them itself before anything else, the error
    /// agreed over the ranks (hier-part's RCB and RIB): one scan of them instead of two.
    CheckedByMethod,
}

impl Callbacks {
    /// Asks the application for its objects: `ZOLTAN_NUM_OBJ_FN`, `ZOLTAN_OBJ_LIST_FN`
    /// (ids and `wdim` weights), and as `geometry` says `ZOLTAN_NUM_GEOM_FN` and
    /// `ZOLTAN_GEOM_MULTI_FN` (else `ZOLTAN_GEOM_FN` per object).
    pub(crate) fn objects(&self, layout: Layout, geometry: Geometry) -> Result<Objects, Error> {
        let num_obj = required(self.num_obj, "ZOLTAN_NUM_OBJ_FN", "Zoltan_Set_Num_Obj_Fn")?;
        let n = ask_count(num_obj, "ZOLTAN_NUM_OBJ_FN", "the number of objects")?;
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
        let list = required(
            self.obj_list,
            "ZOLTAN_OBJ_LIST_FN",
            "Zoltan_Set_Obj_List_Fn",
        )?;
        if n > 0 {
            let (gids, lids) = (o.gids.as_mut_ptr(), o.lids.as_mut_ptr());
            let wgts = o.weights.as_mut_ptr();
            // SAFETY: buffers of n·num_gid, n·num_lid and n·wdim values, as Zoltan passes.
            list.call("ZOLTAN_OBJ_LIST_FN", |f, data, ierr| unsafe {
                f(data, g, l, gids, lids, w, wgts, ierr)
            })?;
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
        if geometry != Geometry::No {
            self.geometry(&mut o, layout, geometry == Geometry::Checked)?;
        }
        Ok(o)
    }

    /// The coordinates into `o`, checked finite when `check`.
    fn geometry(&self, o: &mut Objects, layout: Layout, check: bool) -> Result<(), Error> {
        let num_geom = required(
            self.num_geom,
            "ZOLTAN_NUM_GEOM_FN",
            "Zoltan_Set_Num_Geom_Fn",
        )?;
        let dim = ask_count(num_geom, "ZOLTAN_NUM_GEOM_FN", "the dimension")?;
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
        let (n, d) = (as_int("the number of objects", o.n)?, dim as c_int);
        let (gids, lids, x) = (
            o.gids.as_mut_ptr(),
            o.lids.as_mut_ptr(),
            o.coords.as_mut_ptr(),
        );
        let (gid, lid) = (layout.num_gid, layout.num_lid);
        forms!(self, geom_multi, geom, "GEOM", "Geom").call(
            o.n,
            true,
            // SAFETY: the ids of the n objects and a buffer of n·dim doubles.
            |f, data, ierr| unsafe { f(data, g, l, n, gids, lids, d, x, ierr) },
            // SAFETY: object i's ids and its dim doubles.
            |i, f, data, ierr| unsafe {
                f(
                    data,
                    g,
                    l,
                    gids.add(i * gid),
                    lids.add(i * lid),
                    x.add(i * dim),
                    ierr,
                )
            },
        )?;
        if !check {
            return Ok(());
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
