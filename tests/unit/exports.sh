#!/bin/sh
# libhar exports only MPI_*, mpi_* and har_* and the MPIX_ calls it
# wraps: Open MPI 4.1's MPIX_Allreduce_init, in C and Fortran spellings,
# and MPICH's MPIX_Stream_create, MPIX_Stream_free and
# MPIX_Allreduce_enqueue(_c) (the CUDA runtime and every internal helper
# stay hidden); it links no CUDA library, and carries no test hook.
. "$top_srcdir/tests/lib.sh"
so="$top_builddir/.libs/libhar.so"
nm -D --defined-only "$so" | awk '{print $NF}' | grep -v -E '^(MPI_|mpi_|har_|MPIX_Allreduce_init$|MPIX_ALLREDUCE_INIT$|mpix_allreduce_init(|_|__|_f08_)$|MPIX_Stream_(create|free)$|MPIX_Allreduce_enqueue(_c)?$)' > "$tmp/extra"
[ ! -s "$tmp/extra" ]
tap_result $? "nm -D: only MPI_*, mpi_*, har_*, MPIX_Allreduce_init (C and Fortran) and MPICH's stream calls defined" "$tmp/extra"
nm -D --defined-only "$so" | grep -q " T MPI_Allreduce$"
tap_result $? "MPI_Allreduce is exported"
# The non-blocking, persistent and other collectives, the completion calls,
# MPI_Comm_free, MPI_Comm_disconnect, and their Fortran spellings that call PMPI_* themselves: under Open MPI
# all of them (the persistent all-reduce is MPIX_ in 4.1, MPI_ from 5.0),
# under MPICH the mpi_f08 completion calls, and none under the standard ABI
# (C only).
want="har_allreduce_enqueue MPI_Iallreduce MPI_Wait MPI_Waitall MPI_Testsome MPI_Request_get_status MPI_Startall MPI_Request_free MPI_Comm_free MPI_Comm_disconnect MPI_Bcast MPI_Ialltoallv"
ompi_major=$(printf '#include <mpi.h>\nOMPI_MAJOR_VERSION\n' | $MPICC -E -P -x c - 2> /dev/null | tail -1)
case "$MPI_FLAVOUR" in
openmpi) want="$want mpi_iallreduce_ MPI_WAIT mpi_wait mpi_wait_ mpi_wait__ mpi_wait_f08_ mpi_testsome_ mpi_startall_ mpi_comm_free_ mpi_comm_free_f08_ mpi_comm_disconnect_ mpi_comm_disconnect_f08_"
    want="$want mpi_iallreduce_f08_ mpi_waitall_f08_"
    if [ "$ompi_major" -ge 5 ] 2> /dev/null; then
        want="$want MPI_Allreduce_init MPI_ALLREDUCE_INIT mpi_allreduce_init_ mpi_allreduce_init_f08_"
    else
        want="$want MPIX_Allreduce_init MPIX_ALLREDUCE_INIT mpix_allreduce_init_ mpix_allreduce_init_f08_"
    fi ;;
mpich) want="$want MPI_Allreduce_init mpi_wait_f08_ mpi_waitall_f08_ mpi_testany_f08_ mpi_startall_f08_ mpi_comm_free_f08_ mpi_comm_disconnect_f08_" ;;
*) want="$want MPI_Allreduce_init" ;;
esac
# MPICH's stream communicators, where the MPI has them.
if grep -q "^#define HAR_HAVE_MPIX_STREAM 1" "$top_builddir/config.h"; then
    want="$want MPIX_Stream_create MPIX_Stream_free MPIX_Allreduce_enqueue MPIX_Allreduce_enqueue_c"
fi
# The large-count bindings, where the MPI has them.
if grep -q "^#define HAR_HAVE_MPI_C_COUNTS 1" "$top_builddir/config.h"; then
    want="$want MPI_Allreduce_c MPI_Iallreduce_c MPI_Allreduce_init_c MPI_Bcast_c MPI_Ibcast_c MPI_Alltoallv_c MPI_Ialltoallv_c"
fi
nm -D --defined-only "$so" | awk '{print $NF}' > "$tmp/defined"
for w in $want; do grep -qx "$w" "$tmp/defined" || echo "missing: $w"; done > "$tmp/missing"
[ ! -s "$tmp/missing" ]
tap_result $? "the wrapped calls are exported ($(echo $want | wc -w) checked)" "$tmp/missing"
objdump -p "$so" | grep -E 'NEEDED|SONAME' > "$tmp/deps"
! grep -q 'libcuda' "$tmp/deps" && grep -q 'SONAME *libhar.so.1' "$tmp/deps"
tap_result $? "versioned soname, no link to CUDA libraries" "$tmp/deps"
# Test hooks live in the test build only: the installed library knows no
# test variable (their names are fields of the configuration table) and
# exports no har_test_* symbol.
hooks='har_engine_fake\|test_corrupt\|test_ipc_fail\|test_nccl_fail\|test_cuda_at\|test_kill\|test_no_socket\|test_gpus\|test_stage\|har_cuda_recorded'
{ strings "$so" | grep "$hooks"; nm -D --defined-only "$so" | grep ' har_test_'; } > "$tmp/hooks"
[ ! -s "$tmp/hooks" ]
tap_result $? "the installed libhar carries no test hook" "$tmp/hooks"
strings "$top_builddir/tests/mpi/check_allreduce" | grep -q "$hooks"
tap_result $? "the suite's programs are built with the hooks (so the check above can fail)"
done_testing
