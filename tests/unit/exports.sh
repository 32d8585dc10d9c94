#!/bin/sh
# libhar exports only MPI_*, mpi_* and har_* (the CUDA runtime and every
# internal helper stay hidden), links no CUDA library, and carries no test
# hook.
. "$top_srcdir/tests/lib.sh"
so="$top_builddir/.libs/libhar.so"
nm -D --defined-only "$so" | awk '{print $NF}' | grep -v -E '^(MPI_|mpi_|har_)' > "$tmp/extra"
[ ! -s "$tmp/extra" ]
tap_result $? "nm -D: only MPI_*, mpi_*, har_* defined" "$tmp/extra"
nm -D --defined-only "$so" | grep -q " T MPI_Allreduce$"
tap_result $? "MPI_Allreduce is exported"
objdump -p "$so" | grep -E 'NEEDED|SONAME' > "$tmp/deps"
! grep -q 'libcuda' "$tmp/deps" && grep -q 'SONAME *libhar.so.1' "$tmp/deps"
tap_result $? "versioned soname, no link to CUDA libraries" "$tmp/deps"
# Test hooks live in the test build only: the installed library knows no
# test variable (their names are fields of the configuration table) and
# exports no har_test_* symbol.
hooks='har_engine_fake\|test_corrupt\|test_ipc_fail\|test_nccl_fail\|test_cuda_at\|test_kill\|test_no_socket\|test_gpus\|har_gpu_recorded'
{ strings "$so" | grep "$hooks"; nm -D --defined-only "$so" | grep ' har_test_'; } > "$tmp/hooks"
[ ! -s "$tmp/hooks" ]
tap_result $? "the installed libhar carries no test hook" "$tmp/hooks"
strings "$top_builddir/tests/mpi/check_allreduce" | grep -q "$hooks"
tap_result $? "the suite's programs are built with the hooks (so the check above can fail)"
done_testing
