/*
 * DRUM in the loop from C (drum.h) on a toy computation, run by `cargo xtask ci` under
 * mpirun -np 2 with crates/zoltan-drum/c/hetero-2.xml (static part sizes 0.25 and 0.75):
 *
 *   drum_loop MACHINE.xml
 *
 * Each rank holds points of the unit square and, every step, does work proportional to the
 * points it holds; after each step the DRUM loop measures, decides and repartitions along
 * the machine tree, and the points move to their new ranks (MPI_Alltoallv). Checks: a bad
 * machine file gives DRUM_ERR_MACHINE naming the file and position; the static sizes; the
 * first rebalance gives each rank its static share; points are never lost; the decisions
 * carry reasons; drum_decide decides like Watts et al. Rank 0 prints the steps and
 * `drum_loop: passed`.
 */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "drum.h"

static int me, np;

static void fail(const char *what, int rc) {
  fprintf(stderr, "drum_loop: rank %d: FAILED: %s (status %d: %s)\n", me, what, rc,
          drum_last_error_message());
  MPI_Abort(MPI_COMM_WORLD, 1);
}

/* Work proportional to the points held: a few flops per point, kept by the compiler. */
static double work(const double *x, int n) {
  double s = 0;
  for (int r = 0; r < 200; r++)
    for (int i = 0; i < n; i++) s += sin(x[2 * i] * r) * cos(x[2 * i + 1]);
  return s;
}

static int total_points;

/* The rebalance point, then the points move to their new ranks (MPI_Alltoallv); none may be
   lost. Returns the points this rank holds. */
static int rebalance_and_move(drum_loop_t *l, double *x, int n, double *in, double *out,
                              uint32_t *parts, drum_report_t *r) {
  int rc, *sc = calloc(np, sizeof *sc), *rcnt = calloc(np, sizeof *rcnt);
  int *sd = calloc(np, sizeof *sd), *rd = calloc(np, sizeof *rd), *at = calloc(np, sizeof *at);
  for (int i = 0; i < n; i++) parts[i] = me;
  if ((rc = drum_rebalance(l, x, n, 2, NULL, parts, r))) fail("drum_rebalance", rc);
  for (int i = 0; i < n; i++) sc[parts[i]] += 2;
  for (int d = 1; d < np; d++) sd[d] = sd[d - 1] + sc[d - 1];
  for (int i = 0; i < n; i++) {
    int d = parts[i];
    out[sd[d] + at[d]++] = x[2 * i];
    out[sd[d] + at[d]++] = x[2 * i + 1];
  }
  MPI_Alltoall(sc, 1, MPI_INT, rcnt, 1, MPI_INT, MPI_COMM_WORLD);
  int got = 0;
  for (int d = 0; d < np; d++) { rd[d] = got; got += rcnt[d]; }
  MPI_Alltoallv(out, sc, sd, MPI_DOUBLE, in, rcnt, rd, MPI_DOUBLE, MPI_COMM_WORLD);
  memcpy(x, in, got * sizeof(double));
  int all, held = got / 2;
  MPI_Allreduce(&held, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (all != total_points) fail("points were lost or duplicated", -1);
  free(sc); free(rcnt); free(sd); free(rd); free(at);
  return held;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  MPI_Comm_size(MPI_COMM_WORLD, &np);
  if (argc != 2) fail("usage: drum_loop MACHINE.xml", -1);

  /* A bad machine file: the error names the file and the position. */
  char bad[64];
  snprintf(bad, sizeof bad, "/tmp/drum_loop_bad_%d.xml", me);
  FILE *f = fopen(bad, "w");
  fputs("<machinemodel>\n  <node type=\"SINGLE_COMPUTING\" nodenum=\"0\" parent=\"7\"/>\n</machinemodel>\n", f);
  fclose(f);
  drum_machine_t *m = NULL;
  int rc = drum_machine_read(bad, &m);
  if (rc != DRUM_ERR_MACHINE || !strstr(drum_last_error_message(), bad))
    fail("a bad machine file must give DRUM_ERR_MACHINE naming it", rc);
  remove(bad);

  if ((rc = drum_machine_read(argv[1], &m))) fail("drum_machine_read", rc);
  size_t ranks;
  drum_machine_num_ranks(m, &ranks);
  if ((int)ranks != np) fail("the machine's ranks are not the processes", -1);
  double sizes[64];
  if ((rc = drum_static_part_sizes(m, 0.0, sizes, 64))) fail("drum_static_part_sizes", rc);
  if (drum_static_part_sizes(m, 0.0, sizes, 0) != DRUM_ERR_BUFFER_TOO_SMALL)
    fail("a short array must give DRUM_ERR_BUFFER_TOO_SMALL", -1);

  drum_options_t o;
  drum_options_default(&o);
  o.sizing = DRUM_SIZING_STATIC;
  drum_loop_t *l = NULL;
  if ((rc = drum_start(MPI_COMM_WORLD, m, &o, &l))) fail("drum_start", rc);
  drum_machine_free(m);

  /* 4000 points per rank to start with: the application's uneven first distribution. */
  int total = 4000 * np, n = 4000, cap = total;
  double *x = malloc(2 * cap * sizeof *x), *in = malloc(2 * cap * sizeof *in);
  total_points = total;
  uint32_t *parts = malloc(cap * sizeof *parts);
  unsigned long long s = 99 + me;
  for (int i = 0; i < 2 * n; i++) {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    x[i] = (double)(s >> 11) / 9007199254740992.0;
  }
  double *out = malloc(2 * cap * sizeof *out), sink = 0;
  for (int step = 0; step < 4; step++) {
    sink += work(x, n);
    drum_report_t r;
    n = rebalance_and_move(l, x, n, in, out, parts, &r);
    if (step == 0) {
      if (!r.rebalanced || r.reason != DRUM_REASON_INITIAL) fail("the first point partitions", -1);
      double share = (double)n / total;
      if (fabs(share - sizes[me]) > 0.01) fail("a rank does not hold its static share", -1);
    }
    if (me == 0)
      printf("static step %d: %s (%s), eff %.3f, rank 0 holds %d of %d points (size %.3f)\n",
             step, r.rebalanced ? "rebalanced" : "kept", drum_reason_name(r.reason), r.eff, n,
             total, sizes[0]);
  }
  double monitored[64], measured;
  if ((rc = drum_measure(l, monitored, 64, &measured))) fail("drum_measure", rc);
  double sum = 0;
  for (int r = 0; r < np; r++) sum += monitored[r];
  if (fabs(sum - 1) > 1e-9) fail("the monitored sizes do not add up to 1", -1);
  if ((rc = drum_stop(l))) fail("drum_stop", rc);

  /* The monitored loop: the agents measure the work, every point repartitions (ALWAYS),
     the sizes in use are the monitored ones and stay positive. */
  if ((rc = drum_machine_read(argv[1], &m))) fail("drum_machine_read", rc);
  o.sizing = DRUM_SIZING_MONITORED;
  o.rebalance = DRUM_REBALANCE_ALWAYS;
  if ((rc = drum_start(MPI_COMM_WORLD, m, &o, &l))) fail("drum_start (monitored)", rc);
  drum_machine_free(m);
  for (int step = 0; step < 3; step++) {
    sink += work(x, n);
    drum_report_t r;
    n = rebalance_and_move(l, x, n, in, out, parts, &r);
    if (r.reason != (step == 0 ? DRUM_REASON_INITIAL : DRUM_REASON_ALWAYS) || !r.rebalanced)
      fail("DRUM_REBALANCE_ALWAYS repartitions at every point", -1);
    double inuse[64], s2 = 0;
    if ((rc = drum_part_sizes(l, inuse, 64))) fail("drum_part_sizes", rc);
    for (int q = 0; q < np; q++) {
      if (!(inuse[q] > 0)) fail("a monitored size is not positive", -1);
      s2 += inuse[q];
    }
    if (fabs(s2 - 1) > 1e-9) fail("the sizes in use do not add up to 1", -1);
    if (me == 0)
      printf("monitored step %d: %s, measured %.3f s, sizes in use %.3f/%.3f\n", step,
             drum_reason_name(r.reason), r.measured_s, inuse[0], inuse[1]);
  }
  if ((rc = drum_stop(l))) fail("drum_stop (monitored)", rc);

  int rebalance, reason;
  double eff, loads[2] = {1, 1}, caps[2] = {1, 1};
  if ((rc = drum_decide(loads, caps, 2, 0.9, &rebalance, &reason, &eff))) fail("drum_decide", rc);
  if (rebalance || reason != DRUM_REASON_BALANCED || eff != 1.0) fail("equal loads are balanced", -1);
  loads[0] = 3;
  drum_decide(loads, caps, 2, 0.9, &rebalance, &reason, &eff);
  if (!rebalance || reason != DRUM_REASON_IMBALANCE) fail("3:1 loads on equal ranks are not", -1);
  if (me == 0) printf("drum_loop: passed (%.0f)\n", sink > 0 ? 1.0 : 0.0);
  free(x); free(in); free(out); free(parts);
  MPI_Finalize();
  return 0;
}
