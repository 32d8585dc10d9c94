/* Path names (paths.h). */
#include <string.h>
#include "core/paths.h"

static const struct { const char *name, *doc; } paths[HAR_PATH_COUNT] = {
#define HAR_PATH_ROW(id, name, doc) [HAR_PATH_##id] = {name, doc},
#define HAR_ENGINE_ROW(id, name, built, doc) [HAR_PATH_##id] = {#name, "engine: " doc},
    HAR_PATHS_BEFORE_ENGINES(HAR_PATH_ROW)
    HAR_ENGINE_LIST(HAR_ENGINE_ROW)
    HAR_PATHS_AFTER_ENGINES(HAR_PATH_ROW)
#undef HAR_PATH_ROW
#undef HAR_ENGINE_ROW
};

const char *har_path_name(int path) { return (unsigned)path < HAR_PATH_COUNT ? paths[path].name : NULL; }

const char *har_path_doc(int path) { return (unsigned)path < HAR_PATH_COUNT ? paths[path].doc : NULL; }

int har_path_from_name(const char *name)
{
    for (int p = 0; p < HAR_PATH_COUNT; p++)
        if (strcmp(name, paths[p].name) == 0) return p;
    return -1;
}
