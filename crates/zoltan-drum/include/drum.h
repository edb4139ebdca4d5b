/*
 * drum.h: DRUM's own C API in libzoltan_drum (drum-rs). Written by hand; tests/header.rs
 * checks it against src/drum.rs (every function with its types, every code with its value,
 * the structs' fields).
 *
 * Machine files (DESIGN §2's DrumHead format), the DRUM loop of each rank on the
 * application's communicator (monitoring agent, windows, powers, part sizes, the rebalance
 * decision with its reason, the hierarchical KEEP_CUTS repartition of the caller's
 * coordinates), and the decision alone. Every function that can fail returns DRUM_OK or one
 * DRUM_ERR_* code per kind of error; drum_last_error_message() has the full message (with
 * file:line:col for a machine file). Handles are opaque and freed explicitly; arrays belong
 * to the caller. MPI must be initialised by the application.
 */
#ifndef DRUM_H
#define DRUM_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Status codes. */
#define DRUM_OK 0
#define DRUM_ERR_MACHINE 1          /* the machine file does not load or validate */
#define DRUM_ERR_POWER 2            /* powers or part sizes could not be computed */
#define DRUM_ERR_PARTITION 3        /* the partitioner rejected the input */
#define DRUM_ERR_COMM 4             /* a collective failed (MPI, or another rank) */
#define DRUM_ERR_RANKS 5            /* communicator size != the machine's rank count */
#define DRUM_ERR_MONITOR 6          /* the monitoring agent failed */
#define DRUM_ERR_INVALID 7          /* an argument has a bad value */
#define DRUM_ERR_NULL_POINTER 100   /* a required pointer is NULL */
#define DRUM_ERR_BUFFER_TOO_SMALL 101 /* an output array is too small; nothing written */
#define DRUM_ERR_PANIC 102          /* internal error (a bug: please report) */

/* drum_options_t.sizing */
#define DRUM_SIZING_UNIFORM 0
#define DRUM_SIZING_STATIC 1
#define DRUM_SIZING_MONITORED 2
/* drum_options_t.rebalance */
#define DRUM_REBALANCE_POLICY 0
#define DRUM_REBALANCE_ALWAYS 1
#define DRUM_REBALANCE_NEVER 2
/* Reasons of a decision (drum_reason_name gives the words). */
#define DRUM_REASON_INITIAL 0
#define DRUM_REASON_BALANCED 1
#define DRUM_REASON_IMBALANCE 2
#define DRUM_REASON_POWER_DRIFT 3
#define DRUM_REASON_IMBALANCE_AND_DRIFT 4
#define DRUM_REASON_NOT_PROFITABLE 5
#define DRUM_REASON_ALWAYS 6
#define DRUM_REASON_NEVER 7
#define DRUM_REASON_MEMORY 8

typedef struct DrumMachine drum_machine_t;
typedef struct DrumLoopHandle drum_loop_t;

typedef struct drum_options {
  int sizing;      /* DRUM_SIZING_* (default MONITORED) */
  int rebalance;   /* DRUM_REBALANCE_* (default POLICY) */
  double w_comm;   /* weight of communication power, [0, 1] (DRUM 2005 §3.3) */
  double eff_min;  /* rebalance when eff = U_avg/U_max < eff_min (Watts et al.) */
  double gamma;    /* rebalance only when Gain > gamma * Cost (Lan et al.) */
  double drift;    /* rebalance when a power share drifted by more than this fraction */
  int period_ms;   /* the agent's sampling period */
} drum_options_t;

typedef struct drum_report {
  int rebalanced;      /* 1 if the objects were repartitioned */
  int reason;          /* DRUM_REASON_* */
  double eff;          /* Watts' eff of the loads held before against the new sizes */
  double eff_min;
  double drift;        /* largest relative power-share change (NaN if unknown) */
  double gain_s;       /* Lan's gain, seconds (NaN if unknown) */
  double cost_s;       /* Lan's cost alpha + beta W + delta, seconds (NaN if unknown) */
  double window_s;     /* seconds since the previous rebalance point */
  double measured_s;   /* seconds of measurement the powers came from (0: not renewed) */
  double moved_weight; /* weight that changed rank */
} drum_report_t;

/* Machines. */
int drum_machine_read(const char *path, drum_machine_t **out);
int drum_machine_num_ranks(const drum_machine_t *m, size_t *n);
void drum_machine_free(drum_machine_t *m);
int drum_static_part_sizes(const drum_machine_t *m, double w_comm, double *sizes, size_t len);

/* The DRUM loop (each function collective over the loop's communicator but
   drum_part_sizes). */
void drum_options_default(drum_options_t *o);
int drum_start(MPI_Comm comm, const drum_machine_t *m, const drum_options_t *options,
               drum_loop_t **out);
int drum_part_sizes(const drum_loop_t *l, double *sizes, size_t len);
int drum_measure(drum_loop_t *l, double *sizes, size_t len, double *measured_s);
int drum_rebalance(drum_loop_t *l, const double *coords, size_t n, int dim,
                   const double *weights, uint32_t *parts, drum_report_t *report);
int drum_record_migration(drum_loop_t *l, double seconds, double bytes, double weight);
int drum_stop(drum_loop_t *l);

/* The decision alone, and messages. */
int drum_decide(const double *loads, const double *capacities, size_t n, double eff_min,
                int *rebalance, int *reason, double *eff);
const char *drum_reason_name(int reason);
const char *drum_last_error_message(void);

#ifdef __cplusplus
}
#endif

#endif /* DRUM_H */
