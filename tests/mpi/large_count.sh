#!/bin/sh
# MPI_Allreduce_c (MPI-4 large counts) served by har like MPI_Allreduce
# (tests/mpi/large_count.c): odd counts, in place and not, world and a
# duplicate, each call counted under host_segment; a type har leaves to
# the MPI forwarded through PMPI_Allreduce_c; a null datatype giving the
# MPI's own error class; MPI_Iallreduce_c and MPI_Allreduce_init_c through
# har's wrappers, also staged (HAR_TEST_STAGE=1); one MPI_Bcast_c of
# 2^31 + 1001 bytes, staged; and one call of 2^31 + 1001 bytes (MPI_BOR, 2 GiB
# and more per rank, 2 ranks) served and checked on a sample. Where the MPI
# has no MPI_Allreduce_c (Open MPI 4.1) every case is skipped, saying so.
. "$top_srcdir/tests/lib.sh"
prog="$bin/mpi/large_count"
small="odd counts through MPI_Allreduce_c served by har, results checked; forwarded calls and errors as the MPI's"
corrupt="a result har changed in MPI_Allreduce_c (HAR_TEST_CORRUPT=1:0) is caught"
large="2^31 + 1001 MPI_BYTE elements (MPI_BOR, in place) served by har, sampled check"
staged="HAR_TEST_STAGE=1: the same, MPI_Iallreduce_c and MPI_Allreduce_init_c staged"
bcast="MPI_Bcast_c of 2^31 + 1001 MPI_BYTE elements, staged (HAR_TEST_STAGE=1), sampled check"
if ! grep -q '^#define HAR_HAVE_MPI_C_COUNTS 1' "$top_builddir/config.h"; then
    why="this MPI ($MPI_FLAVOUR) has no MPI_Allreduce_c"
    tap_skip "2 ranks: $small" "$why"
    tap_skip "3 ranks: $small" "$why"
    tap_skip "$corrupt" "$why"
    tap_skip "$large" "$why"
    tap_skip "$staged" "$why"
    tap_skip "$bcast" "$why"
    done_testing
    exit 0
fi
# Where the MPI does not check arguments, no null datatype is tried.
bad=""
mpi_checks_arguments || { bad="--no-bad-input"; small="$small (no bad input: $no_argument_checks)"; }
for np in 2 3; do
    check "$np ranks: $small" $mpi $np "$prog" small $bad
done
check "$staged" env HAR_TEST_STAGE=1 $mpi 3 "$prog" small $bad
env HAR_TEST_CORRUPT=1:0 $mpi 2 "$prog" small > "$tmp/corrupt" 2>&1
[ $? != 0 ] && grep -q "FAIL rank 1: MPI_INT sum" "$tmp/corrupt"
tap_result $? "$corrupt" "$tmp/corrupt"
# har hands calls above HAR_MAX_BYTES (1G by default) to the MPI: raised
# here so that har serves this one.
HAR_MAX_BYTES=3G
export HAR_MAX_BYTES
check "$large" env HAR_TEST_TIMEOUT="${HAR_TEST_TIMEOUT:-600}" $mpi 2 "$prog" large
grep '^large_count: [0-9]' "$tmp/out" | sed 's/^/# /'
check "$bcast" env HAR_TEST_STAGE=1 HAR_TEST_TIMEOUT="${HAR_TEST_TIMEOUT:-600}" $mpi 2 "$prog" bcast
done_testing
