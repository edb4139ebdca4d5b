/*
 * partition.c: the hsfc C ABI end to end.
 *
 * Partitions 500 weighted 2-D points into 4 parts of sizes 16/19/31/34 %, checks that
 * hsfc_point_assign gives every point its part and that hsfc_box_assign covers the parts of
 * the points in a box, repartitions after a load change (KEEP_CUTS), shows one error by code
 * and message, and frees everything. Exits 0 when every check holds, 1 otherwise.
 *
 * Build (from the workspace root, after `cargo build -p hsfc-capi`):
 *   cc -std=c99 -Wall -Wextra -Ihsfc/capi/include hsfc/capi/examples/partition.c \
 *      target/debug/libhsfc_capi.a -lpthread -ldl -lm -o partition
 * hsfc/capi/tests/c_example.rs does this, runs it and checks its output against the Rust API.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hsfc.h"

#define N 500
#define K 4
#define DIM 2

static uint64_t rng_state = 12345;

/* A uniform double in [0, 1) from a 64-bit LCG (the Rust test replays the same sequence). */
static double uniform(void) {
    rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (double)(rng_state >> 11) * (1.0 / 9007199254740992.0);
}

/* FNV-1a over the part ids, to compare whole partitions in one line. */
static uint64_t checksum(const uint32_t *parts, size_t n) {
    uint64_t h = 14695981039346656037ULL;
    for (size_t i = 0; i < n; i++) {
        h ^= parts[i];
        h *= 1099511628211ULL;
    }
    return h;
}

/* Prints the failing call's code and message and exits 1. */
static void check(int rc, const char *what) {
    if (rc != HSFC_OK) {
        fprintf(stderr, "FAIL: %s: %s (%d): %s\n", what, hsfc_error_name(rc), rc,
                hsfc_last_error_message());
        exit(1);
    }
}

static void fail(const char *what) {
    fprintf(stderr, "FAIL: %s\n", what);
    exit(1);
}

int main(void) {
    static double coords[N * DIM], weights[N];
    static uint32_t parts[N], before[N];
    const double sizes[K] = {16, 19, 31, 34}; /* relative: normalised by the library */

    for (size_t i = 0; i < N; i++) {
        coords[DIM * i] = uniform();
        coords[DIM * i + 1] = uniform();
        weights[i] = 0.5 + uniform();
    }
    printf("hsfc %s (header %s)\n", hsfc_version(), HSFC_VERSION);

    /* 1. Partition. */
    hsfc_partition_t *p = NULL;
    check(hsfc_partition(coords, N, DIM, weights, sizes, K, 2, parts, &p), "hsfc_partition");
    size_t k = 0;
    check(hsfc_num_parts(p, &k), "hsfc_num_parts");
    double w[K], t[K], wmax = 0, dev = 0;
    uint64_t counts[K];
    check(hsfc_part_weights(p, w, K), "hsfc_part_weights");
    check(hsfc_targets(p, t, K), "hsfc_targets");
    check(hsfc_part_counts(p, counts, K), "hsfc_part_counts");
    check(hsfc_max_weight(p, &wmax), "hsfc_max_weight");
    check(hsfc_max_rel_dev(p, &dev), "hsfc_max_rel_dev");
    printf("partition: %d points, dim %d, %zu parts\n", N, DIM, k);
    for (size_t q = 0; q < k; q++) {
        printf("part %zu: weight %.17g target %.17g points %llu\n", q, w[q], t[q],
               (unsigned long long)counts[q]);
        if (fabs(w[q] - t[q]) > wmax) fail("a part is off its target by more than wmax");
    }
    printf("max_rel_dev %.3e, every part within the largest weight %.3f of its target\n", dev,
           wmax);
    printf("parts checksum %016llx\n", (unsigned long long)checksum(parts, N));

    /* 2. Point assign: the same part as the partition for every point. */
    for (size_t i = 0; i < N; i++) {
        uint32_t q;
        check(hsfc_point_assign(p, &coords[DIM * i], &q), "hsfc_point_assign");
        if (q != parts[i]) fail("hsfc_point_assign differs from the partition");
    }
    printf("point_assign agrees with the partition for all %d points\n", N);

    /* 3. Box assign: ask for the length first, then fetch; every point in the box must be in
     * one of the parts reported. */
    const double lo[DIM] = {0.2, 0.3}, hi[DIM] = {0.45, 0.6};
    size_t need = 0, got = 0;
    int rc = hsfc_box_assign(p, lo, hi, NULL, 0, &need);
    if (rc != HSFC_ERR_BUFFER_TOO_SMALL || need == 0) fail("box_assign with cap 0");
    printf("box_assign with cap 0: %s, %zu needed\n", hsfc_error_name(rc), need);
    uint32_t box[K];
    check(hsfc_box_assign(p, lo, hi, box, K, &got), "hsfc_box_assign");
    if (got != need) fail("box_assign count changed between calls");
    printf("box [0.2, 0.45] x [0.3, 0.6]: %zu parts:", got);
    for (size_t j = 0; j < got; j++) printf(" %u", box[j]);
    printf("\n");
    size_t inside = 0;
    for (size_t i = 0; i < N; i++) {
        const double *x = &coords[DIM * i];
        if (x[0] < lo[0] || x[0] > hi[0] || x[1] < lo[1] || x[1] > hi[1]) continue;
        inside++;
        int found = 0;
        for (size_t j = 0; j < got; j++) found |= box[j] == parts[i];
        if (!found) fail("a point in the box has a part box_assign did not report");
    }
    printf("box holds %zu points, each in a reported part\n", inside);

    /* 4. Repartition after the load grows on the left: cuts move only as far as needed. */
    for (size_t i = 0; i < N; i++)
        if (coords[DIM * i] < 0.3) weights[i] *= 1.5;
    memcpy(before, parts, sizeof parts);
    hsfc_partition_t *p2 = NULL;
    hsfc_migration_t m;
    check(hsfc_repartition(p, coords, N, DIM, weights, sizes, K, 1, 0.05, parts, &m, &p2),
          "hsfc_repartition");
    uint64_t moved = 0;
    for (size_t i = 0; i < N; i++) moved += parts[i] != before[i];
    if (moved != m.count) fail("migration count differs from the parts that changed");
    check(hsfc_max_rel_dev(p2, &dev), "hsfc_max_rel_dev");
    check(hsfc_part_weights(p2, w, K), "hsfc_part_weights");
    check(hsfc_targets(p2, t, K), "hsfc_targets");
    check(hsfc_max_weight(p2, &wmax), "hsfc_max_weight");
    for (size_t q = 0; q < K; q++)
        if (fabs(w[q] - t[q]) > 0.05 * t[q] + wmax) fail("repartition: a part is off target");
    printf("repartition: migrated weight %.17g (%llu points), kept cuts %d, max_rel_dev "
           "%.3e\n",
           m.weight, (unsigned long long)m.count, m.kept_cuts, dev);
    printf("repartition checksum %016llx\n", (unsigned long long)checksum(parts, N));

    /* 5. One error: a NaN coordinate is reported by code and message, with no handle. */
    coords[DIM * 7 + 1] = NAN;
    hsfc_partition_t *bad = (hsfc_partition_t *)&rc; /* must be reset to NULL */
    rc = hsfc_partition(coords, N, DIM, NULL, sizes, K, 1, parts, &bad);
    if (rc != HSFC_ERR_INVALID_COORDINATE || bad != NULL) fail("NaN coordinate not reported");
    printf("error %s (%d): %s: %s\n", hsfc_error_name(rc), rc, hsfc_error_message(rc),
           hsfc_last_error_message());

    hsfc_free(p2);
    hsfc_free(p);
    hsfc_free(NULL);
    hsfc_release_buffers();
    printf("done\n");
    return 0;
}
