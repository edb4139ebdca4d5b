/*
 * A Zoltan application, written the way Zoltan programs are (query functions, parameters,
 * Zoltan_LB_Partition, Zoltan_Migrate), that checks what it gets. `cargo xtask ci` builds it
 * twice, against the real Zoltan (-ltrilinos_zoltan) and against libzoltan_drum, and runs both
 * under mpirun -np 2 and -np 4; the lines starting with "same:" must be identical.
 *
 *   zoltan_check METHOD DIM N [--drum MACHINE.xml SIZES] [--monitor]
 *
 * METHOD: HSFC, RCB, RIB (or HIER with --drum). N objects in all, spread unevenly over the
 * ranks, with weights in [0.5, 1.5). Checks, each an exit status 1 with a message if it
 * fails:
 *  - the lists: every object exported by exactly one rank (its owner) and imported by its
 *    new owner with the same part; RETURN_LISTS=PARTS agrees with them;
 *  - balance: every part within IMBALANCE_TOL (1.05) of its target, the targets being the
 *    part sizes set on rank 0 with Zoltan_LB_Set_Part_Sizes (2 parts per process, sizes
 *    1, 2, 3, 1, 2, 3, ...), or with --drum the sizes SIZES (a,b,..., one per rank) DRUM
 *    must give for MACHINE.xml (USE_DRUM=1; libzoltan_drum only);
 *  - point assign: Zoltan_LB_Point_PP_Assign gives each object its part (KEEP_CUTS=1);
 *  - box assign: every object inside each of 50 boxes has its part in the box's list;
 *  - migration: after Zoltan_Migrate every object is on the process of its part once, its
 *    data (coordinates, weight and a payload of 1 to 7 doubles) intact;
 *  - then Zoltan_LB_Balance (one part per process, export lists only) and a migration
 *    through the one-object query functions (geometry, size, pack, unpack) with a
 *    mid-migrate function: the same checks;
 *  - errors: an unknown parameter is ZOLTAN_WARN, an unknown method ZOLTAN_FATAL.
 */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include "zoltan.h"

#define TOL 1.05
#define MAXDIM 3

typedef struct {
  int dim;
  int n;     /* objects held */
  int cap;
  ZOLTAN_ID_TYPE *gid;
  double *x; /* dim per object */
  float *w;
} Objects;

static int me, nprocs;

static void fail(const char *what) {
  fprintf(stderr, "zoltan_check: rank %d: FAILED: %s\n", me, what);
  MPI_Abort(MPI_COMM_WORLD, 1);
}

/* A deterministic value in [0, 1) from an id and a salt. */
static double hash01(unsigned id, unsigned salt) {
  unsigned long long z = (unsigned long long)id * 0x9E3779B97F4A7C15ULL + salt * 0xBF58476D1CE4E5B9ULL;
  z ^= z >> 31;
  z *= 0x94D049BB133111EBULL;
  z ^= z >> 29;
  return (double)(z >> 11) / 9007199254740992.0;
}

static double coord(unsigned id, int j) { return hash01(id, 1 + j); }
static float weight(unsigned id) { return (float)(0.5 + hash01(id, 7)); }
static int payload_len(unsigned id) { return 1 + (int)(id % 7); }
static double payload(unsigned id, int k) { return id * 1000.0 + k; }

static void add(Objects *o, ZOLTAN_ID_TYPE g) {
  if (o->n == o->cap) {
    o->cap = o->cap ? 2 * o->cap : 64;
    o->gid = realloc(o->gid, o->cap * sizeof *o->gid);
    o->x = realloc(o->x, o->cap * MAXDIM * sizeof *o->x);
    o->w = realloc(o->w, o->cap * sizeof *o->w);
    if (!o->gid || !o->x || !o->w) fail("out of memory");
  }
  o->gid[o->n] = g;
  for (int j = 0; j < o->dim; j++) o->x[o->n * o->dim + j] = coord(g, j);
  o->w[o->n] = weight(g);
  o->n++;
}

/* Query functions. */
static int num_obj(void *data, int *ierr) {
  *ierr = ZOLTAN_OK;
  return ((Objects *)data)->n;
}
static void obj_list(void *data, int ng, int nl, ZOLTAN_ID_PTR gids, ZOLTAN_ID_PTR lids,
                     int wdim, float *w, int *ierr) {
  Objects *o = data;
  for (int i = 0; i < o->n; i++) {
    gids[i * ng] = o->gid[i];
    lids[i * nl] = i;
    if (wdim > 0) w[i * wdim] = o->w[i];
  }
  *ierr = ZOLTAN_OK;
}
static int num_geom(void *data, int *ierr) {
  *ierr = ZOLTAN_OK;
  return ((Objects *)data)->dim;
}
static void geom_multi(void *data, int ng, int nl, int num, ZOLTAN_ID_PTR gids,
                       ZOLTAN_ID_PTR lids, int dim, double *x, int *ierr) {
  Objects *o = data;
  (void)ng; (void)gids;
  for (int i = 0; i < num; i++)
    for (int j = 0; j < dim; j++) x[i * dim + j] = o->x[lids[i * nl] * o->dim + j];
  *ierr = ZOLTAN_OK;
}

/* Migration: an object travels as its coordinates, weight, payload length and payload. */
static int bytes_of(unsigned g, int dim) {
  return (int)(sizeof(double) * dim + sizeof(float) + sizeof(int) + sizeof(double) * payload_len(g));
}
static void obj_sizes(void *data, int ng, int nl, int num, ZOLTAN_ID_PTR gids,
                      ZOLTAN_ID_PTR lids, int *sizes, int *ierr) {
  Objects *o = data;
  (void)nl; (void)lids;
  for (int i = 0; i < num; i++) sizes[i] = bytes_of(gids[i * ng], o->dim);
  *ierr = ZOLTAN_OK;
}
static void pack(void *data, int ng, int nl, int num, ZOLTAN_ID_PTR gids, ZOLTAN_ID_PTR lids,
                 int *dest, int *sizes, int *idx, char *buf, int *ierr) {
  Objects *o = data;
  (void)dest;
  *ierr = ZOLTAN_OK;
  for (int i = 0; i < num; i++) {
    unsigned l = lids[i * nl], g = gids[i * ng];
    if (o->gid[l] != g || sizes[i] < bytes_of(g, o->dim)) { *ierr = ZOLTAN_FATAL; return; }
    char *p = buf + idx[i];
    memcpy(p, &o->x[l * o->dim], sizeof(double) * o->dim);
    p += sizeof(double) * o->dim;
    memcpy(p, &o->w[l], sizeof(float));
    p += sizeof(float);
    int len = payload_len(g);
    memcpy(p, &len, sizeof(int));
    p += sizeof(int);
    for (int k = 0; k < len; k++) {
      double v = payload(g, k);
      memcpy(p + k * sizeof(double), &v, sizeof(double));
    }
    o->gid[l] = (ZOLTAN_ID_TYPE)-1; /* gone: compacted after the migration */
  }
}
static int received_bad = 0;
static void unpack(void *data, int ng, int num, ZOLTAN_ID_PTR gids, int *sizes, int *idx,
                   char *buf, int *ierr) {
  Objects *o = data;
  (void)sizes;
  *ierr = ZOLTAN_OK;
  for (int i = 0; i < num; i++) {
    unsigned g = gids[i * ng];
    const char *p = buf + idx[i];
    double x[MAXDIM];
    float w;
    int len;
    memcpy(x, p, sizeof(double) * o->dim);
    p += sizeof(double) * o->dim;
    memcpy(&w, p, sizeof(float));
    p += sizeof(float);
    memcpy(&len, p, sizeof(int));
    p += sizeof(int);
    int ok = (w == weight(g)) && (len == payload_len(g));
    for (int j = 0; j < o->dim; j++) ok = ok && x[j] == coord(g, j);
    for (int k = 0; ok && k < len; k++) {
      double v;
      memcpy(&v, p + k * sizeof(double), sizeof(double));
      ok = v == payload(g, k);
    }
    if (!ok) received_bad++;
    add(o, g);
  }
}

/* The one-object versions, used by the second migration (Zoltan_LB_Balance's lists). */
static void geom_one(void *data, int ng, int nl, ZOLTAN_ID_PTR gid, ZOLTAN_ID_PTR lid,
                     double *x, int *ierr) {
  Objects *o = data;
  (void)ng; (void)gid;
  for (int j = 0; j < o->dim; j++) x[j] = o->x[lid[0] * o->dim + j];
  (void)nl;
  *ierr = ZOLTAN_OK;
}
static int obj_size_one(void *data, int ng, int nl, ZOLTAN_ID_PTR gid, ZOLTAN_ID_PTR lid,
                        int *ierr) {
  (void)ng; (void)nl; (void)lid;
  *ierr = ZOLTAN_OK;
  return bytes_of(gid[0], ((Objects *)data)->dim);
}
static void pack_one(void *data, int ng, int nl, ZOLTAN_ID_PTR gid, ZOLTAN_ID_PTR lid, int dest,
                     int size, char *buf, int *ierr) {
  int idx = 0;
  pack(data, ng, nl, 1, gid, lid, &dest, &size, &idx, buf, ierr);
}
static void unpack_one(void *data, int ng, ZOLTAN_ID_PTR gid, int size, char *buf, int *ierr) {
  int idx = 0;
  unpack(data, ng, 1, gid, &size, &idx, buf, ierr);
}
static int mid_calls = 0;
static void mid(void *data, int ng, int nl, int nim, ZOLTAN_ID_PTR ig, ZOLTAN_ID_PTR il, int *ip,
                int *it, int nex, ZOLTAN_ID_PTR eg, ZOLTAN_ID_PTR el, int *ep, int *et, int *ierr) {
  (void)data; (void)ng; (void)nl; (void)nim; (void)ig; (void)il; (void)ip; (void)it;
  (void)nex; (void)eg; (void)el; (void)ep; (void)et;
  mid_calls++;
  *ierr = ZOLTAN_OK;
}

/* Drops the objects packed away (gid -1). */
static void compact(Objects *o) {
  int kept_n = 0;
  for (int i = 0; i < o->n; i++) {
    if (o->gid[i] == (ZOLTAN_ID_TYPE)-1) continue;
    o->gid[kept_n] = o->gid[i];
    memmove(&o->x[kept_n * o->dim], &o->x[i * o->dim], o->dim * sizeof(double));
    o->w[kept_n] = o->w[i];
    kept_n++;
  }
  o->n = kept_n;
}

/* Every (gid, proc, part) triple of all ranks on every rank, sorted by gid. */
typedef struct { unsigned gid; int proc, part; } Rec;
static int by_gid(const void *a, const void *b) {
  unsigned x = ((const Rec *)a)->gid, y = ((const Rec *)b)->gid;
  return (x > y) - (x < y);
}
static Rec *gather(int n, ZOLTAN_ID_PTR gids, int ng, int *procs, int *parts, int *total) {
  Rec *mine = malloc((n + 1) * sizeof *mine);
  for (int i = 0; i < n; i++) mine[i] = (Rec){gids[i * ng], procs[i], parts[i]};
  int *counts = malloc(nprocs * sizeof *counts), *displs = malloc(nprocs * sizeof *displs);
  int bytes = n * (int)sizeof(Rec);
  MPI_Allgather(&bytes, 1, MPI_INT, counts, 1, MPI_INT, MPI_COMM_WORLD);
  int t = 0;
  for (int r = 0; r < nprocs; r++) { displs[r] = t; t += counts[r]; }
  Rec *all = malloc(t + sizeof(Rec));
  MPI_Allgatherv(mine, bytes, MPI_BYTE, all, counts, displs, MPI_BYTE, MPI_COMM_WORLD);
  *total = t / (int)sizeof(Rec);
  qsort(all, *total, sizeof(Rec), by_gid);
  free(mine); free(counts); free(displs);
  return all;
}

/* Every object is on one process, exactly once, its data intact. */
static void check_all_present(Objects *o, int total_n) {
  int nall;
  int *procs_now = malloc((o->n + 1) * sizeof *procs_now), *zero = calloc(o->n + 1, sizeof *zero);
  for (int i = 0; i < o->n; i++) procs_now[i] = me;
  Rec *now = gather(o->n, o->gid, 1, procs_now, zero, &nall);
  if (nall != total_n) fail("objects were lost or duplicated by the migration");
  for (int i = 0; i < nall; i++)
    if (now[i].gid != (unsigned)(i + 1)) fail("an object is missing or twice after the migration");
  int bad = received_bad, bad_all;
  MPI_Allreduce(&bad, &bad_all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (bad_all) fail("an object's data arrived damaged");
  free(procs_now); free(zero); free(now);
}

static int check_rc(int rc, const char *what) {
  if (rc != ZOLTAN_OK && rc != ZOLTAN_WARN) fail(what);
  return rc;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
  if (argc < 4) fail("usage: zoltan_check METHOD DIM N [--drum MACHINE.xml SIZES] [--monitor]");
  const char *method = argv[1];
  int dim = atoi(argv[2]), total_n = atoi(argv[3]);
  const char *machine = NULL, *drum_sizes = NULL;
  int monitor = 0;
  for (int a = 4; a < argc; a++) {
    if (!strcmp(argv[a], "--drum") && a + 2 < argc) { machine = argv[a + 1]; drum_sizes = argv[a + 2]; a += 2; }
    else if (!strcmp(argv[a], "--monitor")) monitor = 1;
    else fail("unknown argument");
  }
  float ver;
  if (Zoltan_Initialize(argc, argv, &ver) != ZOLTAN_OK) fail("Zoltan_Initialize");

  /* Uneven blocks: rank r holds a share proportional to r + 1. */
  Objects o = {dim, 0, 0, NULL, NULL, NULL};
  long tri = (long)nprocs * (nprocs + 1) / 2, start = 0;
  for (int r = 0; r < me; r++) start += total_n * (long)(r + 1) / tri;
  long mine = me == nprocs - 1 ? total_n - start : total_n * (long)(me + 1) / tri;
  for (long i = 0; i < mine; i++) add(&o, (ZOLTAN_ID_TYPE)(start + i + 1));

  struct Zoltan_Struct *zz = Zoltan_Create(MPI_COMM_WORLD);
  if (!zz) fail("Zoltan_Create");
  /* Errors first: the two libraries must answer alike. */
  int rc_unknown = Zoltan_Set_Param(zz, "NO_SUCH_PARAMETER", "1");
  int rc_method = Zoltan_Set_Param(zz, "LB_METHOD", "NO_SUCH_METHOD");
  int k = machine ? nprocs : 2 * nprocs;
  char buf[64];
  Zoltan_Set_Param(zz, "DEBUG_LEVEL", "0");
  Zoltan_Set_Param(zz, "LB_METHOD", method);
  Zoltan_Set_Param(zz, "NUM_GID_ENTRIES", "1");
  Zoltan_Set_Param(zz, "NUM_LID_ENTRIES", "1");
  Zoltan_Set_Param(zz, "OBJ_WEIGHT_DIM", "1");
  Zoltan_Set_Param(zz, "RETURN_LISTS", "ALL");
  Zoltan_Set_Param(zz, "KEEP_CUTS", "1");
  Zoltan_Set_Param(zz, "REMAP", "0");
  snprintf(buf, sizeof buf, "%g", TOL);
  Zoltan_Set_Param(zz, "IMBALANCE_TOL", buf);
  snprintf(buf, sizeof buf, "%d", k);
  Zoltan_Set_Param(zz, "NUM_GLOBAL_PARTS", buf);
  double *size = malloc(k * sizeof *size), size_sum = 0;
  if (machine) {
    if (check_rc(Zoltan_Set_Param(zz, "DRUM_MACHINE_FILE", machine), "DRUM_MACHINE_FILE") ||
        check_rc(Zoltan_Set_Param(zz, "DRUM_MONITORING", monitor ? "1" : "0"), "DRUM_MONITORING") ||
        check_rc(Zoltan_Set_Param(zz, "USE_DRUM", "1"), "USE_DRUM"))
      fail("a DRUM parameter was not taken");
    const char *s = drum_sizes;
    for (int p = 0; p < k; p++) {
      size[p] = strtod(s, (char **)&s);
      if (*s == ',') s++;
    }
  } else {
    int *ids = malloc(k * sizeof *ids);
    float *fs = malloc(k * sizeof *fs);
    for (int p = 0; p < k; p++) { ids[p] = p; fs[p] = (float)(1 + p % 3); size[p] = fs[p]; }
    /* Set on rank 0 only: Zoltan combines what every rank set. */
    if (me == 0 && Zoltan_LB_Set_Part_Sizes(zz, 1, k, ids, NULL, fs) != ZOLTAN_OK)
      fail("Zoltan_LB_Set_Part_Sizes");
    free(ids); free(fs);
  }
  for (int p = 0; p < k; p++) size_sum += size[p];
  Zoltan_Set_Num_Obj_Fn(zz, num_obj, &o);
  Zoltan_Set_Obj_List_Fn(zz, obj_list, &o);
  Zoltan_Set_Num_Geom_Fn(zz, num_geom, &o);
  Zoltan_Set_Geom_Multi_Fn(zz, geom_multi, &o);
  Zoltan_Set_Obj_Size_Multi_Fn(zz, obj_sizes, &o);
  Zoltan_Set_Pack_Obj_Multi_Fn(zz, pack, &o);
  Zoltan_Set_Unpack_Obj_Multi_Fn(zz, unpack, &o);

  int changes, ng, nl, nim, nex;
  ZOLTAN_ID_PTR im_g, im_l, ex_g, ex_l;
  int *im_p, *im_t, *ex_p, *ex_t;
  double t0 = MPI_Wtime();
  int rc = check_rc(Zoltan_LB_Partition(zz, &changes, &ng, &nl, &nim, &im_g, &im_l, &im_p, &im_t,
                                        &nex, &ex_g, &ex_l, &ex_p, &ex_t), "Zoltan_LB_Partition");
  double secs = MPI_Wtime() - t0;

  /* Each object's new part: exported ones from the list, the others keep this rank's. */
  int *part = malloc((o.n + 1) * sizeof *part);
  for (int i = 0; i < o.n; i++) part[i] = me;
  for (int i = 0; i < nex; i++) part[ex_l[i * nl]] = ex_t[i];
  for (int i = 0; i < o.n; i++) if (part[i] < 0 || part[i] >= k) fail("a part out of range");

  /* Lists: exports and imports agree object by object. */
  int nall_ex, nall_im;
  Rec *ex = gather(nex, ex_g, ng, ex_p, ex_t, &nall_ex);
  int *src = malloc((nim + 1) * sizeof *src);
  for (int i = 0; i < nim; i++) src[i] = me; /* the importer, recorded as "proc" */
  Rec *im = gather(nim, im_g, ng, src, im_t, &nall_im);
  if (nall_ex != nall_im) fail("the export and import lists have different lengths");
  for (int i = 0; i < nall_ex; i++) {
    if (i > 0 && ex[i].gid == ex[i - 1].gid) fail("an object exported twice");
    if (ex[i].gid != im[i].gid || ex[i].proc != im[i].proc || ex[i].part != im[i].part)
      fail("an export without the matching import");
  }
  for (int i = 0; i < nim; i++)
    if (im_p[i] < 0 || im_p[i] >= nprocs) fail("an import from no process");

  /* Balance against the targets. */
  double *wsum = calloc(k, sizeof *wsum), *wall = calloc(k, sizeof *wall), wtot = 0;
  for (int i = 0; i < o.n; i++) wsum[part[i]] += o.w[i];
  MPI_Allreduce(wsum, wall, k, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  for (int p = 0; p < k; p++) wtot += wall[p];
  double worst = 0;
  for (int p = 0; p < k; p++) {
    double t = wtot * size[p] / size_sum, r = t > 0 ? wall[p] / t : (wall[p] > 0 ? 1e9 : 0);
    if (r > worst) worst = r;
  }
  if (worst > TOL) {
    char msg[128];
    snprintf(msg, sizeof msg, "a part holds %.4f times its target (IMBALANCE_TOL %.2f)", worst, TOL);
    fail(msg);
  }

  /* Point and box assign. */
  int mismatches = 0, proc, pp, box_misses = 0;
  if (strcmp(method, "HIER")) {
    for (int i = 0; i < o.n; i++) {
      if (check_rc(Zoltan_LB_Point_PP_Assign(zz, &o.x[i * dim], &proc, &pp), "Point_PP_Assign") ||
          pp != part[i])
        mismatches++;
    }
    int *bparts = malloc(k * sizeof *bparts), *bprocs = malloc(nprocs * sizeof *bprocs), nbp, nbr;
    for (int b = 0; b < 50; b++) {
      double lo[3] = {0, 0, 0}, hi[3] = {0, 0, 0};
      for (int j = 0; j < dim; j++) {
        lo[j] = hash01(b, 100 + j) * 0.8;
        hi[j] = lo[j] + 0.05 + 0.3 * hash01(b, 200 + j);
      }
      check_rc(Zoltan_LB_Box_PP_Assign(zz, lo[0], lo[1], lo[2], hi[0], hi[1], hi[2], bprocs, &nbr,
                                       bparts, &nbp), "Box_PP_Assign");
      for (int i = 0; i < o.n; i++) {
        int inside = 1, found = 0;
        for (int j = 0; j < dim; j++) inside = inside && lo[j] <= o.x[i * dim + j] && o.x[i * dim + j] <= hi[j];
        for (int q = 0; inside && q < nbp; q++) found = found || bparts[q] == part[i];
        if (inside && !found) box_misses++;
      }
    }
    free(bparts); free(bprocs);
  }
  int local[3] = {mismatches, box_misses, 0}, global[3];
  MPI_Allreduce(local, global, 3, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  /* Zoltan's RCB and RIB may put a dot lying exactly on a cut on the other side. */
  if (global[0] > total_n / 1000) fail("Point_PP_Assign disagrees with the partition");
  if (global[1] > 0) fail("Box_PP_Assign missed the part of an object inside the box");

  /* Migration. */
  int n_before = o.n;
  if (Zoltan_Migrate(zz, nim, im_g, im_l, im_p, im_t, nex, ex_g, ex_l, ex_p, ex_t) != ZOLTAN_OK)
    fail("Zoltan_Migrate");
  compact(&o);
  (void)n_before;
  check_all_present(&o, total_n);
  /* The ranks hold what the partition gave them: the weight of each process's parts. */
  double wmine = 0, wwant = 0;
  for (int i = 0; i < o.n; i++) wmine += o.w[i];
  for (int i = 0; i < nall_ex; i++) (void)0;
  for (int p = 0; p < k; p++) {
    int owner = machine ? p : p / 2; /* 2 parts per process: Zoltan's distribution */
    if (owner == me) wwant += wall[p];
  }
  if (fabs(wmine - wwant) > 1e-3 * (1 + wwant)) fail("a process does not hold the weight of its parts");

  /* RETURN_LISTS=PARTS lists every object once with its part and process. */
  Zoltan_LB_Free_Part(&im_g, &im_l, &im_p, &im_t);
  Zoltan_LB_Free_Part(&ex_g, &ex_l, &ex_p, &ex_t);
  Zoltan_Set_Param(zz, "RETURN_LISTS", "PARTS");
  check_rc(Zoltan_LB_Partition(zz, &changes, &ng, &nl, &nim, &im_g, &im_l, &im_p, &im_t, &nex,
                               &ex_g, &ex_l, &ex_p, &ex_t), "Zoltan_LB_Partition (PARTS)");
  if (nim != -1 || nex != o.n) fail("RETURN_LISTS=PARTS: every local object, no import list");
  for (int i = 0; i < nex; i++) {
    int owner = machine ? ex_t[i] : ex_t[i] / 2;
    if (ex_p[i] != owner) fail("RETURN_LISTS=PARTS: a process is not its part's");
  }
  Zoltan_LB_Free_Part(&ex_g, &ex_l, &ex_p, &ex_t);

  /* Zoltan_LB_Balance (parts are processes, equal sizes or DRUM's) with export lists only,
     and a migration through the one-object query functions and a mid-migrate function. */
  snprintf(buf, sizeof buf, "%d", nprocs);
  Zoltan_Set_Param(zz, "NUM_GLOBAL_PARTS", buf);
  Zoltan_Set_Param(zz, "RETURN_LISTS", "EXPORT");
  Zoltan_LB_Set_Part_Sizes(zz, 1, -1, NULL, NULL, NULL);
  Zoltan_Set_Geom_Multi_Fn(zz, NULL, NULL);
  Zoltan_Set_Geom_Fn(zz, geom_one, &o);
  Zoltan_Set_Obj_Size_Multi_Fn(zz, NULL, NULL);
  Zoltan_Set_Obj_Size_Fn(zz, obj_size_one, &o);
  Zoltan_Set_Pack_Obj_Multi_Fn(zz, NULL, NULL);
  Zoltan_Set_Pack_Obj_Fn(zz, pack_one, &o);
  Zoltan_Set_Unpack_Obj_Multi_Fn(zz, NULL, NULL);
  Zoltan_Set_Unpack_Obj_Fn(zz, unpack_one, &o);
  Zoltan_Set_Mid_Migrate_PP_Fn(zz, mid, NULL);
  check_rc(Zoltan_LB_Balance(zz, &changes, &ng, &nl, &nim, &im_g, &im_l, &im_p, &nex, &ex_g,
                             &ex_l, &ex_p), "Zoltan_LB_Balance");
  if (nim != -1 || nex < 0) fail("RETURN_LISTS=EXPORT: export lists only");
  int *to_part = malloc((nex + 1) * sizeof *to_part);
  for (int i = 0; i < nex; i++) to_part[i] = ex_p[i];
  if (Zoltan_Migrate(zz, -1, NULL, NULL, NULL, NULL, nex, ex_g, ex_l, ex_p, to_part) != ZOLTAN_OK)
    fail("Zoltan_Migrate (export lists, one-object functions)");
  free(to_part);
  Zoltan_LB_Free_Part(&ex_g, &ex_l, &ex_p, NULL);
  if (mid_calls != 1) fail("the mid-migrate function must be called once");
  compact(&o);
  check_all_present(&o, total_n);
  double held = 0, most;
  for (int i = 0; i < o.n; i++) held += o.w[i];
  MPI_Allreduce(&held, &most, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  if (!machine && most > TOL * wtot / nprocs) fail("Zoltan_LB_Balance: a process above IMBALANCE_TOL");

  double tmax;
  MPI_Reduce(&secs, &tmax, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
  if (me == 0) {
    printf("same: %s %d-D: %d objects on %d processes into %d parts\n", method, dim, total_n, nprocs, k);
    printf("same: unknown parameter: %d, unknown method: %d\n", rc_unknown, rc_method);
    printf("same: checks passed: lists, balance within %.2f, part sizes, point and box assign, "
           "migration, PARTS lists, LB_Balance and one-object migration\n", TOL);
    printf("info: rc %d, changes %d, largest part/target %.4f, point assign mismatches %d, "
           "partition %.4f s\n", rc, changes, worst, global[0], tmax);
  }
  Zoltan_Destroy(&zz);
  if (zz != NULL) fail("Zoltan_Destroy did not clear the pointer");
  MPI_Finalize();
  return 0;
}
