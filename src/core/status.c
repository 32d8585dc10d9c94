/* har's error list (har.h) turned into MPI error codes and words. */
#include "core/status.h"

static const struct { int mpi_class; const char *did, *message; } errors[HAR_ERR_COUNT] = {
    [HAR_SUCCESS] = {MPI_SUCCESS, "succeeded", ""},
#define HAR_ERROR_ROW(id, cls, did, msg) [HAR_ERR_##id] = {cls, did, msg},
    HAR_ERROR_LIST(HAR_ERROR_ROW)
#undef HAR_ERROR_ROW
};
static int codes[HAR_ERR_COUNT];

void har_status_init(void)
{
    for (int e = 1; e < HAR_ERR_COUNT; e++) {
        codes[e] = errors[e].mpi_class;
        if (codes[e] || PMPI_Add_error_class(&codes[e]) != MPI_SUCCESS) continue;
        PMPI_Add_error_string(codes[e], (char *)errors[e].message);  /* a class is also a valid code */
    }
}

int har_error_code(har_error_t err)
{
    if (err == HAR_SUCCESS) return MPI_SUCCESS;
    return (unsigned)err < HAR_ERR_COUNT && codes[err] ? codes[err] : MPI_ERR_OTHER;
}

const char *har_status_what(har_status_t st) { return (unsigned)st < HAR_ERR_COUNT ? errors[st].did : "failed"; }
