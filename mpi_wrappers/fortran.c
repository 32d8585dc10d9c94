/* The Fortran entry points of MPI_ALLREDUCE, MPI_INIT, MPI_INIT_THREAD,
 * MPI_FINALIZE, MPI_COMM_FREE and MPI_COMM_DISCONNECT that har replaces:
 * those of the MPI's Fortran bindings that call PMPI_ functions
 * themselves, which the C wrappers (wrappers.c) therefore never see
 * (fortran.h says which spellings, per MPI).
 *
 * Open MPI: all of them. Its all-reduce bindings call PMPI_Allreduce, and
 * its MPI_INIT, MPI_INIT_THREAD, MPI_FINALIZE, MPI_COMM_FREE and
 * MPI_COMM_DISCONNECT PMPI_Init, PMPI_Init_thread, PMPI_Finalize,
 * PMPI_Comm_free, PMPI_Comm_disconnect. MPICH (libmpichfort 4.0): its
 * all-reduces, of every binding, call the C MPI_Allreduce or
 * MPI_Allreduce_c, and its mpif.h and `use mpi` MPI_INIT and MPI_FINALIZE
 * the C MPI_Init, MPI_Finalize: har sees them already and must not shadow
 * them (its MPI_IN_PLACE and handles are MPICH's business). Only its
 * mpi_f08 MPI_Init, MPI_Init_thread, MPI_Finalize, MPI_Comm_free and
 * MPI_Comm_disconnect call PMPI_Init(NULL, NULL), PMPI_Init_thread,
 * PMPI_Finalize, PMPI_Comm_free, PMPI_Comm_disconnect and set ierror,
 * nothing else (its mpif.h MPI_COMM_FREE and MPI_COMM_DISCONNECT call the
 * C functions): har replaces those five by the same with its own start,
 * teardown and end of started calls.
 *
 * The arguments are the same in every spelling, f08 included: buffers by
 * address, each INTEGER by reference (MPI_Fint *), and an f08 handle, a
 * derived type holding the INTEGER handle alone, by reference too, so as a
 * pointer to that integer; ierror is OPTIONAL in f08, and an absent one is
 * a null pointer (both MPIs' own code tests it, so we do too). */
#include "entry/entry.h"
#include "fortran.h"

#if defined(OPEN_MPI) || defined(MPICH)

/* MPI_INIT(IERROR): as the MPIs' own, the C init without arguments; har
 * starts inside it, on every rank (har_init makes a collective over the
 * world), as in wrappers.c's MPI_Init. */
static void init_f(MPI_Fint *ierror)
{
    int argc = 0;
    char **argv = NULL;
    int rc = PMPI_Init(&argc, &argv);
    if (rc == MPI_SUCCESS) har_init(1);
    har_fortran_set_ierror(ierror, rc);
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
    har_fortran_set_ierror(ierror, rc);
}

/* MPI_FINALIZE(IERROR): har's teardown first, while the MPI still runs. */
static void finalize_f(MPI_Fint *ierror)
{
    har_finalize();
    int rc = PMPI_Finalize();
    har_fortran_set_ierror(ierror, rc);
}

/* MPI_COMM_FREE(COMM, IERROR) and MPI_COMM_DISCONNECT(COMM, IERROR):
 * the handle converted and given back as both MPIs' own bindings do. */
static void comm_release_f(MPI_Fint *comm, MPI_Fint *ierror, int (*release)(MPI_Comm *))
{
    MPI_Comm c = PMPI_Comm_f2c(*comm);
    int rc = release(&c);
    if (rc == MPI_SUCCESS) *comm = PMPI_Comm_c2f(c);
    har_fortran_set_ierror(ierror, rc);
}

static void comm_free_f(MPI_Fint *comm, MPI_Fint *ierror) { comm_release_f(comm, ierror, har_comm_free); }
static void comm_disconnect_f(MPI_Fint *comm, MPI_Fint *ierror) { comm_release_f(comm, ierror, har_comm_disconnect); }

#if defined(OPEN_MPI)

/* MPI_ALLREDUCE(SENDBUF, RECVBUF, COUNT, DATATYPE, OP, COMM, IERROR): the
 * handles converted as Open MPI does (its f2c of a bad handle gives the
 * null handle, which the MPI then reports), then har's C path. */
static void allreduce_f(void *sendbuf, void *recvbuf, const MPI_Fint *count, const MPI_Fint *datatype,
                        const MPI_Fint *op, const MPI_Fint *comm, MPI_Fint *ierror)
{
    int rc = har_allreduce_count(F_SEND(sendbuf), F_BUF(recvbuf), *count, F_TYPE(datatype), F_OP(op), F_COMM(comm),
                                 HAR_BINDING_INT);
    har_fortran_set_ierror(ierror, rc);
}
HAR_FORTRAN_SPELLINGS(allreduce_f, MPI_ALLREDUCE, mpi_allreduce)
#endif
HAR_FORTRAN_SPELLINGS(init_f, MPI_INIT, mpi_init)
HAR_FORTRAN_SPELLINGS(init_thread_f, MPI_INIT_THREAD, mpi_init_thread)
HAR_FORTRAN_SPELLINGS(finalize_f, MPI_FINALIZE, mpi_finalize)
HAR_FORTRAN_SPELLINGS(comm_free_f, MPI_COMM_FREE, mpi_comm_free)
HAR_FORTRAN_SPELLINGS(comm_disconnect_f, MPI_COMM_DISCONNECT, mpi_comm_disconnect)
#endif /* OPEN_MPI || MPICH */
