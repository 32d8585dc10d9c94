/* The Fortran entry points har replaces: those of the MPI's Fortran
 * bindings that call PMPI_ functions themselves, which the C wrappers
 * (wrappers.c) therefore never see.
 *
 * Open MPI: all of them. Its mpif.h and `use mpi` bindings enter through
 * mpi_allreduce_ and the other spellings (libmpi_mpifh), `use mpi_f08`
 * through mpi_allreduce_f08_ (libmpi_usempif08, which calls the former's
 * code), and each calls PMPI_Allreduce; MPI_INIT, MPI_INIT_THREAD and
 * MPI_FINALIZE likewise call PMPI_Init, PMPI_Init_thread, PMPI_Finalize.
 *
 * MPICH (libmpichfort 4.0): its all-reduces, of every binding, call the C
 * MPI_Allreduce or MPI_Allreduce_c, and its mpif.h and `use mpi` MPI_INIT
 * and MPI_FINALIZE the C MPI_Init, MPI_Finalize: har sees them already and
 * must not shadow them (its MPI_IN_PLACE and handles are MPICH's
 * business). Only its mpi_f08 MPI_Init, MPI_Init_thread and MPI_Finalize
 * (mpi_init_f08_, ...) call PMPI_Init(NULL, NULL), PMPI_Init_thread,
 * PMPI_Finalize and set ierror, nothing else: har replaces those three by
 * the same with its own start and teardown (and its mpi_f08 completion
 * calls in fortran_requests.c). tests/fortran/fortran.sh checks with nm -D
 * which of the MPI's Fortran symbols libhar defines.
 *
 * The arguments are the same in every spelling, f08 included: buffers by
 * address, each INTEGER by reference (MPI_Fint *), and an f08 handle, a
 * derived type holding the INTEGER handle alone, by reference too, so as a
 * pointer to that integer; ierror is OPTIONAL in f08, and an absent one is
 * a null pointer (both MPIs' own code tests it, so we do too). */
#include "entry.h"

#if defined(OPEN_MPI) || defined(MPICH)

/* One function, exported under each name a Fortran compiler may call. */
#define HAR_FORTRAN_NAME(name, fn) extern __typeof__(fn) name __attribute__((alias(#fn), visibility("default")));

/* MPI_INIT(IERROR): as the MPIs' own, the C init without arguments; har
 * starts inside it, on every rank (har_init makes a collective over the
 * world), as in wrappers.c's MPI_Init. */
static void init_f(MPI_Fint *ierror)
{
    int argc = 0;
    char **argv = NULL;
    int rc = PMPI_Init(&argc, &argv);
    if (rc == MPI_SUCCESS) har_init(1);
    if (ierror) *ierror = (MPI_Fint)rc;
}

/* MPI_INIT_THREAD(REQUIRED, PROVIDED, IERROR) */
static void init_thread_f(const MPI_Fint *required, MPI_Fint *provided, MPI_Fint *ierror)
{
    int argc = 0, got = 0;
    char **argv = NULL;
    int rc = PMPI_Init_thread(&argc, &argv, *required, &got);
    if (rc == MPI_SUCCESS) {
        *provided = (MPI_Fint)got;
        har_init(1);
    }
    if (ierror) *ierror = (MPI_Fint)rc;
}

/* MPI_FINALIZE(IERROR): har's teardown first, while the MPI still runs. */
static void finalize_f(MPI_Fint *ierror)
{
    har_finalize();
    int rc = PMPI_Finalize();
    if (ierror) *ierror = (MPI_Fint)rc;
}

#if defined(OPEN_MPI)

/* Fortran's MPI_IN_PLACE and MPI_BOTTOM are common blocks, known by their
 * address only: Open MPI compares an argument with the address of the C
 * symbol that its Fortran compiler's spelling of the block gives
 * (/mpi_fortran_in_place/ is mpi_fortran_in_place_ for gfortran; mpi_f08
 * binds its MPI_IN_PLACE to the same name). Weak references to every
 * spelling: the ones this Open MPI does not define are null, and every
 * reference in the process binds to the one definition the loader finds
 * first, as Open MPI's own do. */
extern int mpi_fortran_in_place __attribute__((weak)), mpi_fortran_in_place_ __attribute__((weak)),
    mpi_fortran_in_place__ __attribute__((weak)), MPI_FORTRAN_IN_PLACE __attribute__((weak));
extern int mpi_fortran_bottom __attribute__((weak)), mpi_fortran_bottom_ __attribute__((weak)),
    mpi_fortran_bottom__ __attribute__((weak)), MPI_FORTRAN_BOTTOM __attribute__((weak));

/* `p` is the block `a`..`d` (a null `p` is no block, even where a spelling is undefined). */
static int is_block(const void *p, const int *a, const int *b, const int *c, const int *d)
{
    return p && (p == a || p == b || p == c || p == d);
}

static void *from_fortran(void *buf, int send)
{
    if (send && is_block(buf, &mpi_fortran_in_place, &mpi_fortran_in_place_, &mpi_fortran_in_place__,
                         &MPI_FORTRAN_IN_PLACE))
        return MPI_IN_PLACE;
    if (is_block(buf, &mpi_fortran_bottom, &mpi_fortran_bottom_, &mpi_fortran_bottom__, &MPI_FORTRAN_BOTTOM))
        return MPI_BOTTOM;
    return buf;
}

/* MPI_ALLREDUCE(SENDBUF, RECVBUF, COUNT, DATATYPE, OP, COMM, IERROR): the
 * handles converted as Open MPI does (its f2c of a bad handle gives the
 * null handle, which the MPI then reports), then har's C path. */
static void allreduce_f(void *sendbuf, void *recvbuf, const MPI_Fint *count, const MPI_Fint *datatype,
                        const MPI_Fint *op, const MPI_Fint *comm, MPI_Fint *ierror)
{
    int rc = har_allreduce_count(from_fortran(sendbuf, 1), from_fortran(recvbuf, 0), *count,
                                 PMPI_Type_f2c(*datatype), PMPI_Op_f2c(*op), PMPI_Comm_f2c(*comm), HAR_BINDING_INT);
    if (ierror) *ierror = (MPI_Fint)rc;
}
HAR_FORTRAN_NAME(mpi_allreduce, allreduce_f)
HAR_FORTRAN_NAME(mpi_allreduce_, allreduce_f)
HAR_FORTRAN_NAME(mpi_allreduce__, allreduce_f)
HAR_FORTRAN_NAME(MPI_ALLREDUCE, allreduce_f)
HAR_FORTRAN_NAME(mpi_allreduce_f08_, allreduce_f)

HAR_FORTRAN_NAME(mpi_init, init_f)
HAR_FORTRAN_NAME(mpi_init_, init_f)
HAR_FORTRAN_NAME(mpi_init__, init_f)
HAR_FORTRAN_NAME(MPI_INIT, init_f)
HAR_FORTRAN_NAME(mpi_init_f08_, init_f)
HAR_FORTRAN_NAME(mpi_init_thread, init_thread_f)
HAR_FORTRAN_NAME(mpi_init_thread_, init_thread_f)
HAR_FORTRAN_NAME(mpi_init_thread__, init_thread_f)
HAR_FORTRAN_NAME(MPI_INIT_THREAD, init_thread_f)
HAR_FORTRAN_NAME(mpi_init_thread_f08_, init_thread_f)
HAR_FORTRAN_NAME(mpi_finalize, finalize_f)
HAR_FORTRAN_NAME(mpi_finalize_, finalize_f)
HAR_FORTRAN_NAME(mpi_finalize__, finalize_f)
HAR_FORTRAN_NAME(MPI_FINALIZE, finalize_f)
HAR_FORTRAN_NAME(mpi_finalize_f08_, finalize_f)
#else /* MPICH: mpi_f08's alone */
HAR_FORTRAN_NAME(mpi_init_f08_, init_f)
HAR_FORTRAN_NAME(mpi_init_thread_f08_, init_thread_f)
HAR_FORTRAN_NAME(mpi_finalize_f08_, finalize_f)
#endif
#endif /* OPEN_MPI || MPICH */
