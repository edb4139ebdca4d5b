/*
 * Times Zoltan_LB_Partition as an application sees it (query functions called, lists
 * returned), for `cargo xtask bench zoltan`, which builds this file against the real Zoltan
 * and against libzoltan_drum and runs both under the same mpirun.
 *
 *   zoltan_bench METHOD DIM N REPEATS
 *
 * N points in all (uniform in the unit square or cube, unit weights, a contiguous share per
 * rank), one part per process, RETURN_LISTS=ALL. Each repeat partitions afresh on a new
 * Zoltan structure; rank 0 prints two lines per repeat, `time SECONDS` (the slowest rank's
 * wall time of Zoltan_LB_Partition) and `cpu SECONDS FAULTS` (the largest CPU time of the
 * calling thread over the ranks during the call, a figure a busy machine disturbs less, and the
 * largest number of minor page faults the call took), and last `moved M` (objects exported in
 * the last repeat).
 */
#define _POSIX_C_SOURCE 200809L
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>
#include "zoltan.h"

/* CPU seconds of the calling thread so far. */
static double thread_cpu(void) {
  struct timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Minor page faults of this process so far. */
static long minor_faults(void) {
  struct rusage u;
  getrusage(RUSAGE_SELF, &u);
  return u.ru_minflt;
}

typedef struct {
  int n, dim;
  ZOLTAN_ID_TYPE first;
  double *x;
} Points;

static int num_obj(void *d, int *ierr) {
  *ierr = ZOLTAN_OK;
  return ((Points *)d)->n;
}
static void obj_list(void *d, int ng, int nl, ZOLTAN_ID_PTR g, ZOLTAN_ID_PTR l, int wdim,
                     float *w, int *ierr) {
  Points *p = d;
  (void)wdim; (void)w;
  for (int i = 0; i < p->n; i++) {
    g[i * ng] = p->first + i;
    l[i * nl] = i;
  }
  *ierr = ZOLTAN_OK;
}
static int num_geom(void *d, int *ierr) {
  *ierr = ZOLTAN_OK;
  return ((Points *)d)->dim;
}
static void geom(void *d, int ng, int nl, int num, ZOLTAN_ID_PTR g, ZOLTAN_ID_PTR l, int dim,
                 double *x, int *ierr) {
  Points *p = d;
  (void)ng; (void)g;
  for (int i = 0; i < num; i++)
    for (int j = 0; j < dim; j++) x[i * dim + j] = p->x[l[i * nl] * dim + j];
  *ierr = ZOLTAN_OK;
}

int main(int argc, char **argv) {
  int me, np;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  MPI_Comm_size(MPI_COMM_WORLD, &np);
  if (argc != 5) {
    if (me == 0) fprintf(stderr, "usage: zoltan_bench METHOD DIM N REPEATS\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  int dim = atoi(argv[2]), reps = atoi(argv[4]);
  long n = atol(argv[3]);
  long lo = n * me / np, hi = n * (me + 1) / np;
  Points p = {(int)(hi - lo), dim, (ZOLTAN_ID_TYPE)lo, malloc((hi - lo) * dim * sizeof(double) + 8)};
  unsigned long long s = 12345 + 977 * (unsigned long long)me;
  for (long i = 0; i < (hi - lo) * dim; i++) {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    p.x[i] = (double)(s >> 11) / 9007199254740992.0;
  }
  float ver;
  Zoltan_Initialize(argc, argv, &ver);
  int moved = 0;
  for (int r = 0; r < reps; r++) {
    struct Zoltan_Struct *zz = Zoltan_Create(MPI_COMM_WORLD);
    Zoltan_Set_Param(zz, "DEBUG_LEVEL", "0");
    Zoltan_Set_Param(zz, "LB_METHOD", argv[1]);
    Zoltan_Set_Param(zz, "OBJ_WEIGHT_DIM", "0");
    Zoltan_Set_Param(zz, "RETURN_LISTS", "ALL");
    Zoltan_Set_Param(zz, "REMAP", "0");
    Zoltan_Set_Num_Obj_Fn(zz, num_obj, &p);
    Zoltan_Set_Obj_List_Fn(zz, obj_list, &p);
    Zoltan_Set_Num_Geom_Fn(zz, num_geom, &p);
    Zoltan_Set_Geom_Multi_Fn(zz, geom, &p);
    int changes, ng, nl, nim, nex, *imp, *imt, *exp, *ext;
    ZOLTAN_ID_PTR img, iml, exg, exl;
    MPI_Barrier(MPI_COMM_WORLD);
    long f0 = minor_faults();
    double c0 = thread_cpu();
    double t0 = MPI_Wtime();
    int rc = Zoltan_LB_Partition(zz, &changes, &ng, &nl, &nim, &img, &iml, &imp, &imt, &nex, &exg,
                                 &exl, &exp, &ext);
    double t = MPI_Wtime() - t0, c = thread_cpu() - c0, tmax, cmax;
    long f = minor_faults() - f0, fmax;
    if (rc != ZOLTAN_OK && rc != ZOLTAN_WARN) MPI_Abort(MPI_COMM_WORLD, 1);
    MPI_Reduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    MPI_Reduce(&c, &cmax, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    MPI_Reduce(&f, &fmax, 1, MPI_LONG, MPI_MAX, 0, MPI_COMM_WORLD);
    MPI_Reduce(&nex, &moved, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
    if (me == 0) printf("time %.6f\ncpu %.6f %ld\n", tmax, cmax, fmax);
    Zoltan_LB_Free_Part(&img, &iml, &imp, &imt);
    Zoltan_LB_Free_Part(&exg, &exl, &exp, &ext);
    Zoltan_Destroy(&zz);
  }
  if (me == 0) printf("moved %d\n", moved);
  free(p.x);
  MPI_Finalize();
  return 0;
}
