#!/bin/sh
# A stopped peer with HAR_TIMEOUT: har's own message, an error through the
# handler on every rank, and the communicator keeps working through the MPI.
# (A dead peer is tested on the segment layer with fork: tests/unit/test_seg.)
. "$top_srcdir/tests/lib.sh"
env HAR_TIMEOUT=2 HAR_TEST_TIMEOUT=60 $mpi 2 "$bin/mpi/stopped_peer" > "$tmp/out" 2>&1
rc=$?
[ $rc = 0 ] && grep -q "local peer 1 did not arrive within HAR_TIMEOUT; step input" "$tmp/out" &&
    grep -q "rank 1: all-reduce returned class .* (as expected)" "$tmp/out"
tap_result $? "HAR_TIMEOUT=2, peer stopped: har's error on both ranks, then the MPI serves" "$tmp/out"
done_testing
