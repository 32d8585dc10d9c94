#!/bin/sh
# libhar exports only MPI_*, mpi_* and har_* (the CUDA runtime and every
# internal helper stay hidden), and loads without CUDA in the loader path.
. "$top_srcdir/tests/lib.sh"
so="$top_builddir/.libs/libhar.so"
nm -D --defined-only "$so" | awk '{print $NF}' | grep -v -E '^(MPI_|mpi_|har_)' > "$tmp/extra"
[ ! -s "$tmp/extra" ]
tap_result $? "nm -D: only MPI_*, mpi_*, har_* defined" "$tmp/extra"
nm -D --defined-only "$so" | grep -q " T MPI_Allreduce$"
tap_result $? "MPI_Allreduce is exported"
objdump -p "$so" | grep -E 'NEEDED|SONAME' > "$tmp/deps"
! grep -q 'libcuda' "$tmp/deps" && grep -q 'SONAME *libhar.so.0' "$tmp/deps"
tap_result $? "versioned soname, no link to CUDA libraries" "$tmp/deps"
done_testing
