#!/bin/sh
# The collectives other than MPI_Allreduce on host buffers, blocking and
# non-blocking (tests/mpi/collectives.c: every form, in place and not, two
# roots, uneven v forms with gaps, a derived type with holes): the same
# results without har, under LD_PRELOAD and relinked, each call counted by
# har's wrapper and none staged; the same through the large-count (_c)
# bindings where the MPI has them; and through the staging path with the
# test build's HAR_TEST_STAGE=1, every call staged and every receive buffer
# (gaps, holes and non-roots' buffers included) as it must be; and
# MPI_Allreduce's forwarded calls through the same staging.
. "$top_srcdir/tests/lib.sh"
plain="$bin/mpi/collectives_plain"
linked="$bin/mpi/collectives"
lib="$top_builddir/.libs/libhar.so"
seed=$(test_seed)
echo "# seed $seed"
"${MPICC:-mpicc}" -o "$tmp/relinked" "$top_srcdir/tests/mpi/collectives.c" -L"$top_builddir/.libs" -lhar \
    -Wl,-rpath,"$top_builddir/.libs" -ldl > "$tmp/cc" 2>&1
tap_result $? "entry/collectives.c relinks with -lhar" "$tmp/cc"
for np in 1 3 4; do
    check "$np ranks: without har" $mpi $np "$plain" --seed $seed
    check "$np ranks: LD_PRELOAD=libhar.so, every call through har's wrapper, none staged" \
        env LD_PRELOAD="$lib" $mpi $np "$plain" --seed $seed --expect untouched
    check "$np ranks: relinked, every call through har's wrapper, none staged" \
        $mpi $np "$tmp/relinked" --seed $seed --expect untouched
    check "$np ranks: HAR_TEST_STAGE=1, every call staged, results right" \
        env HAR_TEST_STAGE=1 $mpi $np "$linked" --seed $seed --expect staged
done
# The same calls through the MPI-4 large-count bindings (MPI_Bcast_c, ...,
# MPI_Count counts, MPI_Aint displacements), where the MPI has them.
large_plain="3 ranks, large-count (_c) bindings: LD_PRELOAD=libhar.so, every call through har's wrapper, none staged"
large_staged="3 ranks, large-count (_c) bindings: HAR_TEST_STAGE=1, every call staged, results right"
if grep -q '^#define HAR_HAVE_MPI_C_COUNTS 1' "$top_builddir/config.h"; then
    check "$large_plain" env LD_PRELOAD="$lib" $mpi 3 "$plain" --seed $seed --large --expect untouched
    check "$large_staged" env HAR_TEST_STAGE=1 $mpi 3 "$linked" --seed $seed --large --expect staged
else
    tap_skip "$large_plain" "this MPI ($MPI_FLAVOUR) has no large-count bindings"
    tap_skip "$large_staged" "this MPI ($MPI_FLAVOUR) has no large-count bindings"
fi
# MPI_Allreduce's own staging (entry/entry.c's forward()) is the same module's
# (signed types only: the MPIs' own bugs on 8/16-bit sums and unsigned
# min/max, in the README, are not the staging's).
check "MPI_Allreduce handed to the MPI (HAR_MAX_BYTES=0), HAR_TEST_STAGE=1: staged, every result right" \
    env HAR_TEST_STAGE=1 HAR_MAX_BYTES=0 $mpi 3 "$bin/mpi/check_allreduce" --counts 1,7,1000,65537 \
    --types int,int32,int64,long,float,double --expect staged
env HAR_TEST_STAGE=1 HAR_VERBOSE=1 $mpi 2 "$linked" --seed $seed > "$tmp/out" 2>&1
grep -q "calls per path:.* bcast=8 bcast_staged=8 .*ialltoallv=4 ialltoallv_staged=4" "$tmp/out"
tap_result $? "HAR_VERBOSE=1 prints the collectives' counters" "$tmp/out"
check_fails "HAR_TEST_STAGE=2 (every result copied back with a byte flipped) is caught" "FAIL rank" \
    env HAR_TEST_STAGE=2 $mpi 2 "$linked" --seed $seed
check_fails "--expect staged fails where nothing was staged" "expected staged" \
    $mpi 2 "$linked" --seed $seed --expect staged
done_testing
