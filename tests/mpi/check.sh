#!/bin/sh
# The checking mode (HAR_CHECK=1): no false alarm on the correctness matrix;
# a slot corrupted after its writer published its checksums (the test
# build's HAR_TEST_CORRUPT_SLOT), a ring block corrupted in flight
# (HAR_TEST_CORRUPT_RING) and one rank's result changed (HAR_TEST_CORRUPT)
# each fail the call naming the writer and the step; without the checking
# mode the same faults give wrong results (so the faults are real).
. "$top_srcdir/tests/lib.sh"
prog="$bin/mpi/check_allreduce"
counts=1,7,63,1000,65537,300001
check "HAR_CHECK=1, 3 ranks: the matrix, no false alarm" \
    env HAR_CHECK=1 $mpi 3 "$prog" --counts $counts --sample 2 --seed 7 --expect host_segment
check "HAR_CHECK=1, 2 pretend nodes of 2: the matrix, no false alarm" \
    env HAR_CHECK=1 HAR_NODE_SIZE=2 $mpi 4 "$prog" --counts $counts --sample 2 --seed 7 --comms 2 --expect across
check "HAR_CHECK=1, 3 pretend nodes of 1, HAR_INTER=doubling: the matrix, no false alarm" \
    env HAR_CHECK=1 HAR_NODE_SIZE=1 HAR_INTER=doubling $mpi 3 "$prog" --counts $counts --sample 2 --seed 7 --expect doubling
check "HAR_CHECK=1, nodes of 3+1 (leader): the matrix, no false alarm" \
    env HAR_CHECK=1 HAR_NODE_SIZE=3 $mpi 4 "$prog" --counts $counts --sample 3 --seed 7 --comms 2 --expect leader

# fault DESCRIPTION PATTERN ENV...: with HAR_CHECK the call fails and the
# log matches PATTERN; without it the results are wrong.
fault() {
    desc="$1" pattern="$2"; shift 2
    env HAR_CHECK=1 "$@" "$prog" --counts 10,50000 --types int --ops sum --comms 1 --no-mpi-cases > "$tmp/out" 2>&1
    rc=$?
    [ $rc != 0 ] && grep -q -- "$pattern" "$tmp/out" && ! grep -q "wrong elements" "$tmp/out"
    tap_result $? "HAR_CHECK catches $desc" "$tmp/out"
    env "$@" "$prog" --counts 10,50000 --types int --ops sum --comms 1 --no-mpi-cases > "$tmp/out" 2>&1
    [ $? != 0 ] && grep -q "wrong elements" "$tmp/out"
    tap_result $? "without HAR_CHECK, $desc gives wrong results" "$tmp/out"
}
fault "a corrupted input slot, one node" "rank 1 (world rank 1) published shard" HAR_TEST_CORRUPT_SLOT=1:3 $mpi 3
fault "a corrupted input slot, 2 pretend nodes" "rank 2 (world rank 2) published shard" \
    HAR_TEST_CORRUPT_SLOT=2:3 HAR_NODE_SIZE=2 $mpi 4
fault "a ring block corrupted in flight" "rank 3 (world rank 3) sent a block" HAR_TEST_CORRUPT_RING=3 HAR_NODE_SIZE=2 $mpi 4
fault "a block of the doubling corrupted in flight" "rank 3 (world rank 3) sent a block" \
    HAR_TEST_CORRUPT_RING=3 HAR_INTER=doubling HAR_NODE_SIZE=1 $mpi 5
fault "one rank's result differing from the others'" "the result of rank 1 (world rank 1) differs" \
    HAR_TEST_CORRUPT=1:3 $mpi 3
done_testing
