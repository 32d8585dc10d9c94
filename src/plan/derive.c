/* The tuning rule (derive.h). */
#include <stdlib.h>
#include <string.h>
#include "plan/derive.h"

#define MAX_SIZES 64
#define MAX_CANDS 16

typedef struct {
    uint64_t bytes[MAX_SIZES];
    unsigned cand[MAX_CANDS];
    const har_measure_t *at[MAX_SIZES][MAX_CANDS];  /* NULL: not measured or failed */
    int nsizes, ncands;
} grid_t;

static int index_of_size(grid_t *g, uint64_t bytes)
{
    int k = 0;
    while (k < g->nsizes && g->bytes[k] < bytes) k++;
    if (k < g->nsizes && g->bytes[k] == bytes) return k;
    if (g->nsizes == MAX_SIZES) return -1;
    memmove(&g->bytes[k + 1], &g->bytes[k], (size_t)(g->nsizes - k) * sizeof g->bytes[0]);
    memmove(&g->at[k + 1], &g->at[k], (size_t)(g->nsizes - k) * sizeof g->at[0]);
    memset(&g->at[k], 0, sizeof g->at[k]);
    g->bytes[k] = bytes;
    g->nsizes++;
    return k;
}

static int index_of_cand(grid_t *g, unsigned choice)
{
    for (int c = 0; c < g->ncands; c++)
        if (g->cand[c] == choice) return c;
    if (g->ncands == MAX_CANDS) return -1;
    g->cand[g->ncands] = choice;
    return g->ncands++;
}

/* Is candidate c clearly faster than w at size k? */
static int clearly(const grid_t *g, int k, int c, int w)
{
    const har_measure_t *a = g->at[k][c], *b = g->at[k][w];
    if (!a) return 0;
    if (!b) return 1;
    return a->median <= 0.95 * b->median && a->p90 < b->median;
}

static int fastest(const grid_t *g, int k)
{
    int best = -1;
    for (int c = 0; c < g->ncands; c++)
        if (g->at[k][c] && (best < 0 || g->at[k][c]->median < g->at[k][best]->median)) best = c;
    return best;
}

int har_plan_tune_derive(const har_measure_t *m, int n, const har_plan_tune_row_t *shape, har_plan_tune_row_t *rows,
                         int max_rows) {
    grid_t *g = calloc(1, sizeof *g);
    int winner[MAX_SIZES], nrows = 0;
    if (!g) return -1;
    for (int i = 0; i < n; i++) {
        if (!m[i].ok) continue;
        int k = index_of_size(g, m[i].bytes), c = index_of_cand(g, m[i].choice);
        if (k >= 0 && c >= 0) g->at[k][c] = &m[i];
    }
    int w = -1;
    for (int k = 0; k < g->nsizes; k++) {
        if (w < 0 || !g->at[k][w]) {
            w = fastest(g, k);
        } else {
            int best = -1;
            for (int c = 0; c < g->ncands; c++)
                if (c != w && clearly(g, k, c, w) && (best < 0 || g->at[k][c]->median < g->at[k][best]->median))
                    best = c;
            if (best >= 0 && (k + 1 == g->nsizes || clearly(g, k + 1, best, w))) w = best;
        }
        winner[k] = w;
    }
    for (int k = 0; k < g->nsizes; k++) {
        if (winner[k] < 0) continue;
        int next = k + 1;
        while (next < g->nsizes && winner[next] < 0) next++;
        if (next < g->nsizes && winner[next] == winner[k]) continue;
        if (nrows == max_rows) {
            nrows = -1;
            break;
        }
        rows[nrows] = *shape;
        rows[nrows].max_bytes = next < g->nsizes ? g->bytes[k] : UINT64_MAX;
        rows[nrows].choice = g->cand[winner[k]];
        nrows++;
    }
    free(g);
    return nrows;
}
