/* The engines built here, from paths.h's list: the one place that names
 * them all (engines/engine.h). An engine's `built` flag (1 or 0) picks the line. */
#include <pthread.h>
#include "engines/engine.h"

#define HAR_CAT(a, b) HAR_CAT_(a, b)
#define HAR_CAT_(a, b) a##b

#define HAR_DECLARE_1(id, name) extern HAR_HIDDEN const har_engine_t har_engine_##name;
#define HAR_DECLARE_0(id, name)
#define HAR_ENGINE_1(id, name) [HAR_PATH_##id] = &har_engine_##name,
#define HAR_ENGINE_0(id, name)

#define HAR_DECLARE(id, name, built, doc) HAR_CAT(HAR_DECLARE_, built)(id, name)
#define HAR_ENGINE(id, name, built, doc) HAR_CAT(HAR_ENGINE_, built)(id, name)

HAR_ENGINE_LIST(HAR_DECLARE)

const har_engine_t *const har_engines[HAR_PATH_COUNT] = {HAR_ENGINE_LIST(HAR_ENGINE)};

static har_engine_set_t set;
static pthread_once_t set_once = PTHREAD_ONCE_INIT;

static void make_set(void)
{
    for (int p = 0; p < HAR_PATH_COUNT; p++) set.by_path[p] = har_engines[p] ? &har_engines[p]->can : NULL;
    har_plan_rank_engines(&set);
}

const har_engine_set_t *har_engine_set(void)
{
    pthread_once(&set_once, make_set);
    return &set;
}
