//! The Zoltan structure (`struct Zoltan_Struct`): the communicator, the parameters, the query
//! functions, the part sizes, the kept cuts, and what `Zoltan_LB_Partition` does with them.

use crate::drum_state::{DrumParams, DrumState};
use crate::error::{Done, Error};
use crate::laps::Laps;
use crate::params::{Changed, Method, ParamError, Params};
use crate::partdist::PartDist;
use crate::query::{Callbacks, Geometry, Layout, Objects};
use comm::{Comm, MpiComm, ReduceOp};
use hier_part::{Bisection, Hier, HierPartition, Rcb, Rib};
use part_api::{Par, Partitioner, Points, agreed};
use std::time::Instant;

/// One `Zoltan_LB_Set_Part_Sizes` entry.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PartSize {
    pub global: bool,
    pub part: usize,
    pub weight_index: usize,
    pub size: f32,
}

/// The cuts of the last partition (for point and box assign, and KEEP_CUTS repartitions).
#[derive(Debug)]
pub(crate) enum Cuts {
    Hsfc(hsfc::Partition),
    Bisection(Bisection),
    Hier(HierPartition),
}

/// What the last partition left: its cuts and its distribution of parts.
#[derive(Debug)]
pub(crate) struct Kept {
    pub cuts: Cuts,
    pub dist: PartDist,
    pub dim: usize,
}

/// The opaque `struct Zoltan_Struct` of the C API.
#[derive(Debug)]
pub struct ZoltanStruct {
    pub(crate) comm: MpiComm,
    pub(crate) params: Params,
    pub(crate) cb: Callbacks,
    pub(crate) part_sizes: Vec<PartSize>,
    pub(crate) kept: Option<Kept>,
    pub(crate) drum: Option<DrumState>,
    hsfc_ws: hsfc::Workspace,
    /// The phases of the current partition (`ZD_DEBUG_TIMES`).
    pub(crate) laps: Laps,
}

/// A partition of this process's objects.
#[derive(Debug)]
pub(crate) struct Assignment {
    pub objects: Objects,
    /// New part of each object.
    pub parts: Vec<u32>,
    /// Which process holds which part (an object's new process: [`Assignment::proc`]).
    pub dist: PartDist,
    /// Nothing moves (`LB_METHOD=NONE`).
    pub stay: bool,
    /// Words of a global id.
    pub num_gid: usize,
    /// The part each object is in now (Zoltan without a part query function: this rank).
    pub input_part: usize,
    /// This rank.
    pub me: usize,
    pub warning: Option<String>,
}

impl ZoltanStruct {
    /// A structure on `comm` with Zoltan's default parameters.
    pub(crate) fn new(comm: MpiComm) -> ZoltanStruct {
        ZoltanStruct {
            comm,
            params: Params::default(),
            cb: Callbacks::default(),
            part_sizes: Vec::new(),
            kept: None,
            drum: None,
            hsfc_ws: hsfc::Workspace::default(),
            laps: Laps::default(),
        }
    }

    pub(crate) fn rank(&self) -> usize {
        self.comm.rank()
    }

    /// `Zoltan_Set_Param`: a warning for an unknown name or bad value, an error for an
    /// unsupported method or a machine file that does not load; DRUM's parameters (re)start
    /// the DRUM state once `USE_DRUM=1` and `DRUM_MACHINE_FILE` are both set.
    pub(crate) fn set_param(&mut self, name: &str, value: &str) -> Result<Done, Error> {
        match self.params.set(name, value) {
            Ok(Changed::Other) => Ok(Done::Ok),
            Ok(Changed::Drum) => {
                if let Some(old) = self.drum.take() {
                    old.stop()?;
                }
                let p = &self.params;
                if let (true, Some(file)) = (p.use_drum, p.drum_machine_file.as_deref()) {
                    let dp = DrumParams {
                        file,
                        monitoring: p.drum_monitoring,
                        w_comm: p.drum_w_comm,
                        period_ms: p.drum_period_ms,
                    };
                    self.drum = Some(DrumState::start(&self.comm, &dp)?);
                }
                Ok(Done::Ok)
            }
            Err(ParamError::Method(m)) => Err(Error::Unsupported(m)),
            Err(e) => Ok(Done::Warn(e.to_string())),
        }
    }

    /// Makes a local outcome collective (`part_api::agreed`): every rank gets its value, or
    /// an error when any rank failed.
    pub(crate) fn agreed<T>(&self, local: Result<T, Error>) -> Result<T, Error> {
        agreed_on(&self.comm, local)
    }

    fn layout(&self) -> Layout {
        Layout {
            num_gid: self.params.num_gid,
            num_lid: self.params.num_lid,
            wdim: self.params.obj_weight_dim,
        }
    }

    /// The partition (collective): part distribution, objects, target sizes, the method's
    /// parts, and each object's process.
    pub(crate) fn assign(&mut self) -> Result<Assignment, Error> {
        let dist = PartDist::build(
            &self.comm,
            self.params.num_global_parts,
            self.params.num_local_parts,
        )?;
        self.laps.lap("partdist");
        let method = self.params.method;
        let geometry = match method {
            Method::None => Geometry::No,
            // hier-part checks the coordinates first thing (`check_points`), agreed.
            Method::Rcb | Method::Rib => Geometry::CheckedByMethod,
            // HSFC's KEEP_CUTS assigns the points to the old parts on each rank alone, before
            // anything is agreed; HIER: checked here too.
            Method::Hsfc | Method::Hier => Geometry::Checked,
        };
        let local = self.cb.objects(self.layout(), geometry);
        self.laps.lap("queries");
        let mut objects = self.agreed(local)?;
        self.laps.lap("agreed");
        let me = self.rank();
        // Zoltan without a part query function: an object's current part is its rank.
        let input_part = me;
        let (parts, warning) = if method == Method::None {
            (vec![input_part as u32; objects.n], None)
        } else {
            self.check_dim(&objects)?;
            let (targets, size_warning) = self.targets(&dist)?;
            self.laps.lap("dim+targets");
            let (parts, warning) = self.run_method(&objects, &targets, &dist)?;
            // Freed before the lists are built, which may reuse the memory.
            objects.coords = Vec::new();
            objects.weights = Vec::new();
            self.laps.lap("method");
            (parts, join(size_warning, warning))
        };
        Ok(Assignment {
            objects,
            parts,
            dist,
            stay: method == Method::None,
            num_gid: self.params.num_gid,
            input_part,
            me,
            warning,
        })
    }

    /// Every rank must report the same dimension (ranks without objects too).
    fn check_dim(&self, o: &Objects) -> Result<(), Error> {
        let mut d = [o.dim as u64, u64::MAX - o.dim as u64];
        self.comm.allreduce_u64(ReduceOp::Max, &mut d)?;
        let (max, min) = (d[0], u64::MAX - d[1]);
        if max != min {
            return Err(Error::BadInput(format!(
                "ZOLTAN_NUM_GEOM_FN returned {min} on some ranks and {max} on others"
            )));
        }
        Ok(())
    }

    /// The relative size of each part: DRUM's with `USE_DRUM=1` (each rank's size shared
    /// among its parts), else what `Zoltan_LB_Set_Part_Sizes` set on any rank, combined as
    /// Zoltan does (the largest value given for a part over the ranks, 1 for parts nobody
    /// set), else equal. Collective.
    fn targets(&mut self, dist: &PartDist) -> Result<(Vec<f64>, Option<String>), Error> {
        let k = dist.k;
        if self.params.use_drum {
            let Some(drum) = self.drum.as_mut() else {
                return Err(Error::BadInput(
                    "USE_DRUM=1 needs DRUM_MACHINE_FILE (the machine file of DESIGN §2)".into(),
                ));
            };
            drum.refresh(&self.comm)?;
            let sizes = drum.sizes();
            let mut t = vec![0.0; k];
            for (r, &s) in sizes.iter().enumerate() {
                let mine = dist.parts_of(r);
                for p in mine.clone() {
                    t[p] += s / mine.len() as f64;
                }
            }
            let w = std::mem::take(&mut drum.warnings);
            return Ok((
                t,
                (!w.is_empty()).then(|| format!("DRUM: {}", w.join("; "))),
            ));
        }
        let mut given = [self.part_sizes.len() as u64];
        self.comm.allreduce_u64(ReduceOp::Max, &mut given)?;
        if given[0] == 0 {
            return Ok((vec![1.0; k], None));
        }
        let first_local = dist.parts_of(self.rank()).start;
        let mut t = vec![-1.0f64; k];
        let mut out_of_range = None;
        for e in &self.part_sizes {
            let p = if e.global {
                e.part
            } else {
                first_local + e.part
            };
            if e.weight_index > 0 {
                continue; // one weight per object: sizes of other weights do not apply
            }
            match t.get_mut(p) {
                Some(x) => *x = f64::from(e.size),
                None => out_of_range = Some(p),
            }
        }
        self.comm.allreduce_f64(ReduceOp::Max, &mut t)?;
        for x in &mut t {
            if *x < 0.0 {
                *x = 1.0;
            }
        }
        if t.iter().sum::<f64>() <= 0.0 {
            return Err(Error::BadInput("the part sizes add up to zero".into()));
        }
        let warning = out_of_range.map(|p| {
            format!("a part size was set for part {p}, but there are {k} parts; it is ignored")
        });
        Ok((t, warning))
    }
}

/// Makes a local outcome collective over `comm` (`part_api::agreed`): every rank gets its
/// value, or an error when any rank failed.
pub(crate) fn agreed_on<T>(comm: &MpiComm, local: Result<T, Error>) -> Result<T, Error> {
    agreed(comm, local, |ranks, first| Error::OtherRank {
        ranks,
        first,
    })
}

impl Assignment {
    /// The new process of object `i` (Zoltan's: the process of its part; for a part spread
    /// over processes, this one if it holds the part, else one chosen by the global id).
    pub(crate) fn proc(&self, i: usize) -> usize {
        let p = self.parts[i] as usize;
        if self.stay {
            self.me
        } else if self.dist.identity {
            p
        } else {
            let g = self.num_gid;
            self.dist
                .proc_of(p, Some(&self.objects.gids[i * g..][..g]), self.me)
        }
    }
}

/// Two optional warnings as one.
fn join(a: Option<String>, b: Option<String>) -> Option<String> {
    match (a, b) {
        (Some(a), Some(b)) => Some(format!("{a}; {b}")),
        (a, b) => a.or(b),
    }
}

impl ZoltanStruct {
    /// Runs the method on this rank's objects into `targets.len()` parts; keeps the cuts.
    fn run_method(
        &mut self,
        o: &Objects,
        targets: &[f64],
        dist: &PartDist,
    ) -> Result<(Vec<u32>, Option<String>), Error> {
        let wdim = self.params.obj_weight_dim;
        let weights: Option<Vec<f64>> = (wdim > 0).then(|| {
            o.weights
                .chunks_exact(wdim)
                .map(|w| f64::from(w[0]))
                .collect()
        });
        let mut warning = (wdim > 1).then(|| {
            format!("OBJ_WEIGHT_DIM = {wdim}: only the first weight of each object is balanced")
        });
        let points = Points::new(&o.coords, o.dim, weights.as_deref());
        let mut parts = vec![0u32; o.n];
        let started = Instant::now();
        let previous = self.kept.take();
        let cuts = match self.params.method {
            Method::Hsfc => self.hsfc(points, targets, &mut parts, previous, &mut warning)?,
            Method::Rcb | Method::Rib => {
                let keep_ties = self.params.rectilinear_blocks;
                let b = if self.params.method == Method::Rcb {
                    Rcb {
                        keep_ties,
                        par: Par::Seq,
                    }
                    .partition(&self.comm, points, targets, &mut parts)?
                } else {
                    Rib {
                        keep_ties,
                        par: Par::Seq,
                    }
                    .partition(&self.comm, points, targets, &mut parts)?
                };
                Cuts::Bisection(b)
            }
            Method::Hier => self.hier(points, dist, &mut parts, previous, &mut warning)?,
            Method::None => unreachable!("NONE does not partition"),
        };
        if self.params.debug_level >= 2 && self.rank() == 0 {
            eprintln!(
                "zoltan-drum: {} partition into {} parts: {:.6} s on rank 0",
                self.params.method.name(),
                targets.len(),
                started.elapsed().as_secs_f64()
            );
        }
        self.kept = Some(Kept {
            cuts,
            dist: dist.clone(),
            dim: o.dim,
        });
        Ok((parts, warning))
    }

    /// HSFC; with `KEEP_CUTS=1` and a previous HSFC partition of the same dimension and part
    /// count, the KEEP_CUTS repartition (cuts stay where `IMBALANCE_TOL` allows). Like
    /// Zoltan's HSFC, a part above `IMBALANCE_TOL` times its target is a warning.
    fn hsfc(
        &mut self,
        points: Points<'_>,
        targets: &[f64],
        parts: &mut [u32],
        previous: Option<Kept>,
        warning: &mut Option<String>,
    ) -> Result<Cuts, Error> {
        if points.dim == 1 {
            return Err(Error::Unsupported(
                "LB_METHOD HSFC needs 2 or 3 coordinates here (Zoltan's HSFC also takes 1):                  use RCB for 1-D objects"
                    .into(),
            ));
        }
        let cfg = hsfc::Hsfc {
            par: Par::Seq,
            tolerance: (self.params.imbalance_tol - 1.0).clamp(0.0, 0.99),
        };
        let prev = match previous {
            Some(Kept {
                cuts: Cuts::Hsfc(p),
                dim,
                ..
            }) if self.params.keep_cuts && dim == points.dim && p.num_parts() == targets.len() => {
                Some(p)
            }
            _ => None,
        };
        // Agreed: every rank kept the same cuts, or none did.
        let mut have = [u64::from(prev.is_some())];
        self.comm.allreduce_u64(ReduceOp::Sum, &mut have)?;
        let p = match prev {
            Some(prev) if have[0] == self.comm.size() as u64 => {
                prev.assign(points.coords, parts)?;
                cfg.repartition(&mut self.hsfc_ws, &self.comm, &prev, points, targets, parts)?
            }
            _ => cfg.partition_with(&mut self.hsfc_ws, &self.comm, points, targets, parts)?,
        };
        if p.imbalance() > self.params.imbalance_tol {
            *warning = join(
                warning.take(),
                Some(format!(
                    "HSFC: a part got {:.4} times its target, above IMBALANCE_TOL = {}",
                    p.imbalance(),
                    self.params.imbalance_tol
                )),
            );
        }
        Ok(Cuts::Hsfc(p))
    }

    /// HIER: along the machine tree of `DRUM_MACHINE_FILE`, each level with its
    /// `<lbmethod>`, one part per process (as Zoltan's HIER); a previous HIER partition is
    /// the start of a KEEP_CUTS repartition (levels with `KEEP_CUTS="1"` keep their cuts).
    fn hier(
        &mut self,
        points: Points<'_>,
        dist: &PartDist,
        parts: &mut [u32],
        previous: Option<Kept>,
        warning: &mut Option<String>,
    ) -> Result<Cuts, Error> {
        let Some(drum) = self.drum.as_ref() else {
            return Err(Error::Unsupported(
                "LB_METHOD HIER partitions along the machine tree: set USE_DRUM=1 and                  DRUM_MACHINE_FILE (Zoltan's HIER query functions are not supported)"
                    .into(),
            ));
        };
        if !dist.identity {
            return Err(Error::BadInput(format!(
                "LB_METHOD HIER makes one part per process: NUM_GLOBAL_PARTS = {} differs from                  the {} processes",
                dist.k,
                self.comm.size()
            )));
        }
        parts.fill(self.rank() as u32);
        let hier = Hier { par: Par::Seq };
        let plan = drum.plan();
        let result = match previous {
            Some(Kept {
                cuts: Cuts::Hier(prev),
                dim,
                ..
            }) if dim == points.dim => {
                let mut ws = hier_part::Workspace::default();
                hier.repartition(&mut ws, &self.comm, plan, &prev, points, parts)?
            }
            _ => hier.partition(&self.comm, plan, points, parts)?,
        };
        if !result.warnings.is_empty() {
            let w: Vec<String> = result.warnings.iter().map(|w| w.to_string()).collect();
            *warning = join(warning.take(), Some(format!("HIER: {}", w.join("; "))));
        }
        Ok(Cuts::Hier(result))
    }
}
