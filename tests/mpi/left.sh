#!/bin/sh
# A rank that calls MPI_Finalize while its peers still wait for it on
# another communicator (tests/mpi/left: communicator A fails, rank 1
# finalizes, the others call on B): every rank left on B fails at once,
# and har says that rank 1 left, not that it died; within a node also what
# it had seen fail before (the last rank's other count on A), across nodes
# (the death watch's "bye") before which call it left. Again with rank 1
# calling PMPI_Finalize, which only har's backstop sees.
. "$top_srcdir/tests/lib.sh"
# every rank left on B names rank 1 as one that left
all_say_left() {
    for r in 0 2 3; do
        grep -q "^har\[$r .*rank 1 (world rank 1, host .*) left (MPI_Finalize or MPI_Comm_free)" "$tmp/out" || return 1
    done
}
for run in 0 2 1 0:--bypass 2:--bypass 1:--bypass; do
    ns=${run%%:*} how=
    case $run in *:*) how=${run#*:} ;; esac
    env HAR_NODE_SIZE=$ns HAR_TEST_TIMEOUT=60 $mpi 4 "$bin/mpi/left" $how > "$tmp/out" 2>&1
    rc=$?
    case $ns in
    0) why="before it left, it had seen that world rank 3 \\(host .*\\) called MPI_Allreduce with another count" ;;
    *) why="(before it left, it had seen that world rank|left before call 1, after seeing that world rank)" ;;
    esac
    [ $rc = 0 ] && [ "$(grep -c "as expected" "$tmp/out")" = 4 ] && ! grep -q "rank 1 (world rank 1, host .*) died" "$tmp/out" &&
        all_say_left && grep -Eq "$why" "$tmp/out"
    tap_result $? "HAR_NODE_SIZE=$ns: rank 1 finalizes${how:+ (PMPI_Finalize, past har's wrapper)} after A failed; B's ranks fail at once, saying it left" "$tmp/out"
done
done_testing
