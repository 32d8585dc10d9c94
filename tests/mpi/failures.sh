#!/bin/sh
# A stopped peer with HAR_TIMEOUT: har's own message, an error through the
# handler on every rank of every (pretend) node, the communicator failed for
# good, nothing hangs. (A dead peer is tested on the segment layer with fork:
# tests/unit/test_seg.)
. "$top_srcdir/tests/lib.sh"
env HAR_TIMEOUT=2 HAR_TEST_TIMEOUT=60 $mpi 2 "$bin/mpi/stopped_peer" > "$tmp/out" 2>&1
rc=$?
[ $rc = 0 ] && grep -q "rank 0: rank 1 (world rank 1, host .*) did not come within HAR_TIMEOUT (found by rank 0 at step arrival" "$tmp/out" &&
    [ "$(grep -c 'as expected' "$tmp/out")" = 2 ]
tap_result $? "one node, HAR_TIMEOUT=2, peer stopped: har's error on both ranks, later calls fail" "$tmp/out"
env HAR_TIMEOUT=2 HAR_NODE_SIZE=2 HAR_TEST_TIMEOUT=90 $mpi 4 "$bin/mpi/stopped_peer" > "$tmp/out" 2>&1
rc=$?
[ $rc = 0 ] && [ "$(grep -c "rank [0-9]: rank 1 .*did not come within HAR_TIMEOUT" "$tmp/out")" = 4 ] &&
    [ "$(grep -c 'as expected' "$tmp/out")" = 4 ]
tap_result $? "2 nodes of 2, peer stopped: every rank fails naming it (its node by the wait, the other by the ring), none hangs" "$tmp/out"
done_testing
