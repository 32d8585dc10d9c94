#!/bin/sh
# The collectives other than the all-reduce from Fortran, through mpif.h
# and through `use mpi_f08` (tests/mpi/fcollectives.f90): relinked with
# -lhar, every call reaches har and none is staged; linked with the test
# build under HAR_TEST_STAGE=1, every one is staged and its results arrive
# (the non-blocking ones through the Fortran MPI_WAIT). Open MPI's Fortran
# bindings call PMPI_* directly, so this passes there only through har's
# own Fortran spellings (mpi_wrappers/collectives.c); MPICH's call the C
# functions. Skipped without this MPI's Fortran compiler.
. "$top_srcdir/tests/lib.sh"
fortran_compiler
src="$top_srcdir/tests/mpi/fcollectives.f90"
# gfortran 10 on refuses one buffer argument of several ranks without this
fflags="-cpp -fallow-argument-mismatch"
for binding in mpifh f08; do
    flags="$fflags"
    [ $binding = f08 ] && flags="$flags -DF08"
    fortran_builds $binding "$src" $flags
    check "$binding: relinked: every collective, blocking and not, reaches har, none staged, results right" \
        $mpi 3 "$tmp/relinked" untouched
    check "$binding: HAR_TEST_STAGE=1, 3 ranks: every one staged, results right (the non-blocking ones through MPI_WAIT)" \
        env HAR_TEST_STAGE=1 $mpi 3 "$tmp/linked" staged
    check "$binding: HAR_TEST_STAGE=1, 4 ranks: the same" \
        env HAR_TEST_STAGE=1 $mpi 4 "$tmp/linked" staged
    check_fails "$binding: HAR_TEST_STAGE=2 (every copy back flipped) is caught" "FAIL rank" \
        env HAR_TEST_STAGE=2 $mpi 2 "$tmp/linked" staged
done
done_testing
