#!/bin/sh
# MPI_IALLREDUCE, the persistent all-reduce (Open MPI 4.1's
# MPIX_ALLREDUCE_INIT, MPICH's MPI_ALLREDUCE_INIT) and the completion calls
# from Fortran, through mpif.h and through `use mpi_f08`: relinked with
# -lhar, every call reaches har and none is staged; linked with the
# test build under HAR_TEST_STAGE=1, every one is staged and its results
# arrive through the Fortran completion calls. Open MPI's Fortran bindings
# call PMPI_* directly, so this passes there only through har's own
# Fortran spellings (mpi_wrappers/fortran_requests.c); MPICH's call the C
# functions. Skipped without this MPI's Fortran compiler.
. "$top_srcdir/tests/lib.sh"
fortran_compiler
src="$top_srcdir/tests/mpi/frequests.f90"
# gfortran 10 on refuses one buffer argument of several ranks without this
fflags="-cpp -fallow-argument-mismatch"
case "$MPI_FLAVOUR" in
openmpi) fflags="$fflags -DALLREDUCE_INIT=MPIX_ALLREDUCE_INIT -DMPI_EXT" ;;
*) fflags="$fflags -DALLREDUCE_INIT=MPI_ALLREDUCE_INIT" ;;
esac
for binding in mpifh f08; do
    flags="$fflags"
    [ $binding = f08 ] && flags="$flags -DF08"
    fortran_builds $binding "$src" $flags
    check "$binding: relinked: every MPI_IALLREDUCE and the persistent all-reduce through har, none staged, results right" \
        $mpi 3 "$tmp/relinked" untouched
    check "$binding: HAR_TEST_STAGE=1: every one staged, results back through the Fortran completion calls" \
        env HAR_TEST_STAGE=1 $mpi 3 "$tmp/linked" staged
    check "$binding: HAR_ALGO=fake after a blocking MPI_ALLREDUCE: har serves every MPI_IALLREDUCE and MPI_START itself, completed through the Fortran calls" \
        env HAR_ALGO=fake $mpi 3 "$tmp/linked" har
    check "$binding: across 2 pretend nodes of 2, after a blocking MPI_ALLREDUCE: every MPI_IALLREDUCE and MPI_START on har's blocking path, moved on by the Fortran completion calls" \
        env HAR_NODE_SIZE=2 $mpi 4 "$tmp/linked" across
    check_fails "$binding: HAR_TEST_STAGE=2 (every copy back flipped) is caught" "FAIL rank" \
        env HAR_TEST_STAGE=2 $mpi 2 "$tmp/linked" staged
done
done_testing
