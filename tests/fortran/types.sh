#!/bin/sh
# The Fortran datatypes (MPI_INTEGER, MPI_INTEGER1..8, MPI_REAL,
# MPI_DOUBLE_PRECISION, MPI_REAL4, MPI_REAL8, MPI_LOGICAL) with every op:
# har's answer and error class are the MPI's own (PMPI_Allreduce in the
# same process), and har serves exactly the pairs the MPI standard allows
# (tests/fortran/types.c); a result har changes (HAR_TEST_CORRUPT) is
# caught, so the comparison can fail.
. "$top_srcdir/tests/lib.sh"
for np in 2 3; do
    check "$np ranks: each Fortran type and op: the MPI's answer and error class, served where the standard allows" \
        $mpi $np "$bin/fortran/types"
    [ $np = 2 ] && grep -e '^types: MPI' -e '^types: note' "$tmp/out" | sed 's/^/# /'
done
env HAR_TEST_CORRUPT=1:0 $mpi 2 "$bin/fortran/types" > "$tmp/corrupt" 2>&1
[ $? != 0 ] && grep -q "another result than the MPI's" "$tmp/corrupt"
tap_result $? "a result har changed (HAR_TEST_CORRUPT=1:0) is reported as another result than the MPI's" "$tmp/corrupt"
done_testing
