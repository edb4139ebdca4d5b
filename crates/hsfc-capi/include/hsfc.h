/*
 * hsfc.h: C ABI of hsfc, Hilbert space-filling-curve partitioning to arbitrary part sizes.
 *
 * Link with libhsfc_capi.a (plus -lpthread -ldl -lm) or libhsfc_capi.so.
 * Written by hand; hsfc/capi/tests/header.rs checks every function, type and status code
 * below against the Rust side (hsfc/capi/src/lib.rs), which documents each call in full.
 *
 * Conventions
 * - Functions that can fail return an int status: HSFC_OK (0) or an HSFC_ERR_* code.
 *   hsfc_last_error_message() gives the full message of the last failed call on the
 *   calling thread (the index and value at fault); it is the only hidden state.
 * - Counts and lengths are size_t. Points are interleaved coordinates, dim (2 or 3)
 *   doubles per point. A pointer paired with a count of 0 may be NULL.
 * - Output arrays belong to the caller. A partition is an opaque handle owned by the caller
 *   from hsfc_partition/hsfc_repartition until hsfc_free. A handle is immutable: any number
 *   of threads may query it at once.
 * - No Rust panic crosses this boundary: it becomes HSFC_ERR_PANIC.
 */
#ifndef HSFC_H
#define HSFC_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Version of the library this header belongs to; hsfc_version() returns the same string. */
#define HSFC_VERSION "0.1.0"

/* Status codes. 1..15: one per hsfc::Error variant; 99: an hsfc::Error newer than this
 * ABI; 100..: errors of the C boundary itself. */
#define HSFC_OK 0
#define HSFC_ERR_DIMENSION 1              /* dim is not 2 or 3 (negative values too) */
#define HSFC_ERR_NO_PARTS 2               /* k = 0 */
#define HSFC_ERR_TOO_MANY_PARTS 3         /* k > 2^32 - 1 */
#define HSFC_ERR_TOO_MANY_POINTS 4        /* n > 2^32 - 1 */
#define HSFC_ERR_INVALID_TARGET 5         /* a size is negative, NaN or infinite */
#define HSFC_ERR_ZERO_TARGETS 6           /* every size is 0 */
#define HSFC_ERR_LENGTH_MISMATCH 7        /* an array has the wrong length */
#define HSFC_ERR_INVALID_COORDINATE 8     /* a coordinate is NaN or infinite */
#define HSFC_ERR_INVALID_WEIGHT 9         /* a weight is negative, NaN or infinite */
#define HSFC_ERR_INVALID_TOLERANCE 10     /* tolerance not in [0, 1) */
#define HSFC_ERR_INVALID_BOX 11           /* a box bound is not finite, or lo > hi */
#define HSFC_ERR_INCOMPATIBLE_PREVIOUS 12 /* repartition: dim or k differs from prev */
#define HSFC_ERR_INVALID_ON_OTHER_RANK 13 /* distributed only: reserved */
#define HSFC_ERR_COMM 14                  /* distributed only: reserved */
#define HSFC_ERR_THREAD_POOL 15           /* the thread pool could not be built */
#define HSFC_ERR_WEIGHT_OVERFLOW 16       /* the weights sum beyond the largest double */
#define HSFC_ERR_MIXED_WEIGHTS 17         /* distributed only: reserved */
#define HSFC_ERR_UNKNOWN 99               /* an hsfc error this ABI version does not know */
#define HSFC_ERR_NULL_POINTER 100         /* a required pointer is NULL */
#define HSFC_ERR_BUFFER_TOO_SMALL 101     /* an output array is too small; nothing written */
#define HSFC_ERR_PANIC 102                /* internal error (a caught Rust panic): a bug */

/* Opaque partition: bounding box, cuts, per-part figures. */
typedef struct hsfc_partition hsfc_partition_t;

/* Weight moved by a repartition. */
typedef struct hsfc_migration {
    double weight;  /* total weight of the points whose part changed */
    uint64_t count; /* number of points whose part changed */
    int kept_cuts;  /* 1: previous box and cuts kept; 0: a point left the box, fresh cuts */
} hsfc_migration_t;

/* Partitions n points (coords: n*dim interleaved doubles, dim 2 or 3) with optional weights
 * (NULL = unit weights, else n finite values >= 0) into k parts of relative sizes sizes[k]
 * (finite, >= 0, not all 0; normalised). threads <= 1 runs on the calling thread, t > 1 on a
 * library-owned pool of t threads; the result does not depend on it. parts[n] receives each
 * point's part (< k); *out a new handle to free with hsfc_free. Each part's weight ends
 * within the largest point weight of its target. coords and parts may be NULL when n = 0.
 * On error *out is NULL and the contents of parts are unspecified. */
int hsfc_partition(const double *coords, size_t n, int dim, const double *weights,
                   const double *sizes, size_t k, int threads, uint32_t *parts,
                   hsfc_partition_t **out);

/* Repartitions from prev (Zoltan KEEP_CUTS; prev is not consumed): same arguments as
 * hsfc_partition, dim and k must match prev. parts holds each point's current part on entry
 * and its new part on return. A cut stays where it was unless a part next to it would be off
 * its target by more than tolerance*T_k (tolerance in [0, 1)). migration may be NULL. */
int hsfc_repartition(const hsfc_partition_t *prev, const double *coords, size_t n, int dim,
                     const double *weights, const double *sizes, size_t k, int threads,
                     double tolerance, uint32_t *parts, hsfc_migration_t *migration,
                     hsfc_partition_t **out);

/* Part of the point x[dim] (Zoltan Point_PP_Assign); outside points are projected onto the
 * bounding box. For every partitioned point it is the part the partition wrote. */
int hsfc_point_assign(const hsfc_partition_t *p, const double *x, uint32_t *part);

/* hsfc_point_assign for n points: coords[n*dim] in, parts[n] out. */
int hsfc_assign(const hsfc_partition_t *p, const double *coords, size_t n, uint32_t *parts);

/* Every part owning a point of the box [lo, hi] (dim values each; Zoltan Box_PP_Assign, exact
 * at the curve's resolution), increasing. *count receives how many. If *count <= cap they are
 * in parts[0 .. *count]; otherwise nothing is written to parts and HSFC_ERR_BUFFER_TOO_SMALL
 * is returned with the needed length in *count (cap = 0, parts = NULL asks for it; a cap of
 * hsfc_num_parts always suffices). */
int hsfc_box_assign(const hsfc_partition_t *p, const double *lo, const double *hi,
                    uint32_t *parts, size_t cap, size_t *count);

/* Accessors. Arrays take their length len, which must be >= k (else
 * HSFC_ERR_BUFFER_TOO_SMALL, nothing written); k values are written. */
int hsfc_num_parts(const hsfc_partition_t *p, size_t *k);
int hsfc_dim(const hsfc_partition_t *p, int *dim);
int hsfc_num_points(const hsfc_partition_t *p, uint64_t *n);
int hsfc_part_weights(const hsfc_partition_t *p, double *weights, size_t len);
int hsfc_part_counts(const hsfc_partition_t *p, uint64_t *counts, size_t len);
/* T_k: normalised size times the total weight. */
int hsfc_targets(const hsfc_partition_t *p, double *targets, size_t len);
/* max |W_k/T_k - 1| over the parts with T_k > 0. */
int hsfc_max_rel_dev(const hsfc_partition_t *p, double *dev);
/* max W_k/T_k over the parts with T_k > 0 (Zoltan's imbalance; 1 is perfect). */
int hsfc_imbalance(const hsfc_partition_t *p, double *imbalance);
/* Largest single point weight: the balance limit |W_k - T_k| <= w. */
int hsfc_max_weight(const hsfc_partition_t *p, double *w);

/* Frees a handle; NULL is ignored. */
void hsfc_free(hsfc_partition_t *p);

/* Frees the scratch buffers the calling thread keeps between calls (about 8 bytes per point). */
void hsfc_release_buffers(void);

/* Static strings (do not free): a code's name ("HSFC_ERR_INVALID_COORDINATE", or
 * "HSFC_UNKNOWN_STATUS") and one-line description. */
const char *hsfc_error_name(int code);
const char *hsfc_error_message(int code);

/* Full message of the last failed call on this thread ("" if none); successful calls leave
 * it unchanged. Valid until the next failing call on this thread. */
const char *hsfc_last_error_message(void);

/* "MAJOR.MINOR.PATCH" of the library (compare with HSFC_VERSION). */
const char *hsfc_version(void);

#ifdef __cplusplus
}
#endif

#endif /* HSFC_H */
