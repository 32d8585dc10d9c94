/* The one way har names and exports its Fortran entry points, and reads
 * Open MPI's Fortran sentinels: for fortran.c and fortran_requests.c.
 *
 * Which spellings: Open MPI's Fortran bindings call PMPI_* themselves in
 * every spelling (mpif.h and `use mpi`: MPI_WAIT, mpi_wait, mpi_wait_,
 * mpi_wait__; `use mpi_f08`: mpi_wait_f08_, with the same arguments), so
 * har defines all five. MPICH's call the C MPI_* functions, which are
 * har's already, except mpi_f08's MPI_Init, MPI_Init_thread, MPI_Finalize,
 * MPI_Comm_free, MPI_Comm_disconnect and completion calls (mpi_wait_f08_,
 * ...), which call PMPI_*: har
 * defines the f08 spelling alone. tests/fortran/fortran.sh checks with
 * nm -D which of the MPI's Fortran symbols libhar defines. */
#pragma once
#include <mpi.h>
#if defined(OPEN_MPI) || defined(MPICH)
#include <dlfcn.h>

/* Exports function `fn` under `name` as well. */
#define HAR_EXPORT_AS(fn, name) extern __typeof__(fn) name __attribute__((alias(#fn), visibility("default")));

#ifdef OPEN_MPI
#define HAR_FORTRAN_SPELLINGS(fn, UPPER, lower)                                                           \
    HAR_EXPORT_AS(fn, UPPER) HAR_EXPORT_AS(fn, lower) HAR_EXPORT_AS(fn, lower##_) HAR_EXPORT_AS(fn, lower##__) \
    HAR_EXPORT_AS(fn, lower##_f08_)
#else
#define HAR_FORTRAN_SPELLINGS(fn, UPPER, lower) HAR_EXPORT_AS(fn, lower##_f08_)
#endif

/* IERROR, where the caller gave it (OPTIONAL in mpi_f08: a null pointer
 * when left out; both MPIs' own code tests it). */
static inline void har_fortran_set_ierror(MPI_Fint *ierror, int rc)
{
    if (ierror) *ierror = (MPI_Fint)rc;
}

#ifdef OPEN_MPI
/* Open MPI's Fortran MPI_IN_PLACE, MPI_BOTTOM, MPI_STATUS_IGNORE and
 * MPI_STATUSES_IGNORE are common blocks, known by their address only,
 * under whichever name its Fortran compiler gave them (/mpi_fortran_in_place/
 * is mpi_fortran_in_place_ for gfortran; mpi_f08 binds its constants to the
 * same blocks). Looked up once, in every spelling, where the loader finds
 * them first, as every reference in the process binds to: an argument is
 * the sentinel if it is any of them (a spelling not defined is no block). */
typedef struct {
    const char *names[4];
    void *at[4];
    int looked;
} har_fortran_sentinel_t;

#define HAR_FORTRAN_SENTINEL(lower, UPPER) {{#lower "_", #lower, #lower "__", #UPPER}, {0}, 0}

static inline int har_fortran_is(void *p, har_fortran_sentinel_t *s)
{
    if (!__atomic_load_n(&s->looked, __ATOMIC_ACQUIRE)) {
        for (int i = 0; i < 4; i++) s->at[i] = dlsym(RTLD_DEFAULT, s->names[i]);
        __atomic_store_n(&s->looked, 1, __ATOMIC_RELEASE);  /* racing threads store the same */
    }
    for (int i = 0; p && i < 4; i++)
        if (p == s->at[i]) return 1;
    return 0;
}

/* A Fortran buffer argument as C sees it: MPI_IN_PLACE only where a send
 * buffer may be in place, MPI_BOTTOM anywhere, as Open MPI's own bindings
 * convert them. */
static inline void *har_fortran_buffer(void *p, int send)
{
    static har_fortran_sentinel_t in_place = HAR_FORTRAN_SENTINEL(mpi_fortran_in_place, MPI_FORTRAN_IN_PLACE),
                                  bottom = HAR_FORTRAN_SENTINEL(mpi_fortran_bottom, MPI_FORTRAN_BOTTOM);
    if (send && har_fortran_is(p, &in_place)) return MPI_IN_PLACE;
    if (har_fortran_is(p, &bottom)) return MPI_BOTTOM;
    return p;
}

/* A Fortran argument as the C internals take it: a buffer where the
 * standard allows MPI_IN_PLACE (F_SEND) or not (F_BUF); an INTEGER, an
 * INTEGER array (the same in memory while MPI_Fint is an int), a handle. */
_Static_assert(sizeof(MPI_Fint) == sizeof(int), "an INTEGER array is passed as an int array");
#define F_SEND(p) har_fortran_buffer(p, 1)
#define F_BUF(p) har_fortran_buffer(p, 0)
#define F_INT(p) ((int)*(p))
#define F_INTS(p) ((const int *)(p))
#define F_TYPE(p) PMPI_Type_f2c(*(p))
#define F_OP(p) PMPI_Op_f2c(*(p))
#define F_COMM(p) PMPI_Comm_f2c(*(p))

/* Is a status argument MPI_STATUS_IGNORE, an array MPI_STATUSES_IGNORE? */
static inline int har_fortran_status_ignored(void *p)
{
    static har_fortran_sentinel_t s = HAR_FORTRAN_SENTINEL(mpi_fortran_status_ignore, MPI_FORTRAN_STATUS_IGNORE);
    return har_fortran_is(p, &s);
}

static inline int har_fortran_statuses_ignored(void *p)
{
    static har_fortran_sentinel_t s = HAR_FORTRAN_SENTINEL(mpi_fortran_statuses_ignore, MPI_FORTRAN_STATUSES_IGNORE);
    return har_fortran_is(p, &s);
}
#else
/* MPICH's mpi_f08 MPI_STATUS_IGNORE and MPI_STATUSES_IGNORE are the objects
 * MPI_F08_STATUS_IGNORE and MPI_F08_STATUSES_IGNORE point to. */
static inline int har_fortran_status_ignored(void *p) { return p == (void *)MPI_F08_STATUS_IGNORE; }
static inline int har_fortran_statuses_ignored(void *p) { return p == (void *)MPI_F08_STATUSES_IGNORE; }
#endif
#endif
