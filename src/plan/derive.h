/* The rule that turns har-bench --tuning measurements into table rows, in
 * one place for har-bench --tuning and har-info --derive-tuning. Built into
 * those tools only, not into libhar. */
#ifndef HAR_DERIVE_H
#define HAR_DERIVE_H

#include "plan/tuning.h"

/* One candidate's timing at one size. */
typedef struct {
    uint64_t bytes;
    unsigned choice;        /* path mask the candidate forced */
    double median, p90;     /* microseconds */
    int ok;                 /* checked and served as forced */
} har_measure_t;

/* Rows for one (memory, class, ranks per node, nodes), given as `shape`
 * (its max_bytes and choice are ignored), from measurements in any order.
 * The rule: the fastest median wins the smallest size. At each larger size
 * the winner so far stays unless a candidate is clearly faster there and at
 * the next size too (or there is no next size): clearly faster means a
 * median at most 95% of the winner's and a 90th percentile below the
 * winner's median, so that noise within the spread of the measurements
 * never flips the choice. A winner no longer measured (har-bench drops a
 * path 4 times slower than the best) gives way to the fastest. Runs of one
 * winner merge; the last run covers every larger size. Returns the number
 * of rows, or -1 if more than max_rows. */
HAR_HIDDEN int har_plan_tune_derive(const har_measure_t *m, int n, const har_plan_tune_row_t *shape,
                                    har_plan_tune_row_t *rows, int max_rows);

#endif
