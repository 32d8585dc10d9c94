#!/bin/sh
# One rank's buffers that cannot be used (null, the same twice, or
# overlapping) in a call har serves, the others' good: the node learns of
# it at the arrival, so every rank fails the call at once with a message
# naming the rank and why, the rank at fault with MPI_ERR_BUFFER; nobody
# waits for ever, and the communicator fails for good (bad_buffer checks
# the classes). On one node, on 2 pretend nodes of 2 and on 4 of 1 (the
# other nodes learn of it from the notice). Overlapping buffers in a call
# that goes to the MPI are refused by har on every rank that passes them.
. "$top_srcdir/tests/lib.sh"
prog="$bin/mpi/bad_buffer"
for what in null-send null-recv same overlap; do
    for shape in "3 0" "4 2" "4 1"; do
        np=${shape% *} ns=${shape#* }
        check "$what on rank 1 of $np, HAR_NODE_SIZE=$ns: every rank fails, naming it" \
            sh -c '"$@" > "$0" 2>&1; rc=$?; cat "$0"; [ $rc = 0 ] &&
                   [ "$(grep -c "rank 1 (world rank 1, host .*) passed an invalid buffer (.*: its .*)" "$0")" -ge 1 ] &&
                   [ "$(grep -c "as expected" "$0")" = '"$np"' ]' \
            "$tmp/o" env HAR_NODE_SIZE=$ns HAR_TEST_TIMEOUT=60 $mpi $np "$prog" $what --rank 1
    done
done
# Every rank's buffers overlap, in a call larger than HAR_MAX_BYTES (the
# MPI's to serve): refused on every rank, as MPICH does (Open MPI alone
# would return a wrong result); the communicator stays usable.
check "overlap on every rank, a call har hands to the MPI: MPI_ERR_BUFFER everywhere" \
    sh -c '"$@" > "$0" 2>&1; rc=$?; cat "$0"; [ $rc = 0 ] && [ "$(grep -c "as expected" "$0")" = 3 ] &&
           grep -q "MPI_Allreduce refused (MPI_ERR_BUFFER): its send and receive buffers overlap" "$0"' \
    "$tmp/o" env HAR_MAX_BYTES=64 HAR_TEST_TIMEOUT=60 $mpi 3 "$prog" overlap --all --forwarded
done_testing
