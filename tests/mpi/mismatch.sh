#!/bin/sh
# Ranks that call MPI_Allreduce with different arguments get the class the
# MPI gives for it (MPI_ERR_TRUNCATE for another count or datatype,
# MPI_ERR_OP for another op) on every rank, with a message naming the
# ranks, instead of wrong data or a hang: within a node at the arrival,
# across nodes from the first message between them (ring or doubling).
# The communicator fails for good after it; another one works.
. "$top_srcdir/tests/lib.sh"
prog="$bin/mpi/mismatch"
for what in count type op; do
    check "one node, 3 ranks, another $what on ranks 1 and 2" \
        sh -c '"$@" > "$0" 2>&1; rc=$?; cat "$0"; [ $rc = 0 ] && grep -q "MPI_Allreduce differs between ranks: rank 0" "$0"' \
        "$tmp/o" $mpi 3 "$prog" $what
    check "2 pretend nodes of 2, another $what on the last rank (found in its node, passed on)" \
        env HAR_NODE_SIZE=2 $mpi 4 "$prog" $what --last --count 100000
    # 100 ints: the first ring blocks (64 to 128 bytes) travel inside the
    # header's message; another count or type on the last rank makes its
    # block too large for that, so both kinds of first message meet.
    for n in 100000 100; do
        check "4 pretend nodes of 1, count $n, another $what on the last rank (found between nodes)" \
            sh -c '"$@" > "$0" 2>&1; rc=$?; cat "$0"; [ $rc = 0 ] && grep -q "MPI_Allreduce differs between nodes" "$0"' \
            "$tmp/o" env HAR_NODE_SIZE=1 $mpi 4 "$prog" $what --last --count $n
    done
    # The check NCCL between nodes takes before its first block (the
    # neighbours' headers, then the agreement on the outcome, which the
    # ranks that failed post and leave), run before the ring's first block
    # (HAR_TEST_CHECK_CALLS): on 3 and 4 nodes every rank ends with the
    # class, none hangs, and the MPI takes har's requests. The ranks between
    # learn it from the agreement or from a failure notice, whichever comes
    # first; that none of them goes on into NCCL is gpu.sh's to show.
    for np in 3 4; do
        check "$np pretend nodes of 1, the check NCCL between nodes takes, another $what on the last rank: every rank gets the class" \
            env HAR_NODE_SIZE=1 HAR_TEST_CHECK_CALLS=1 HAR_INTER=ring $mpi $np "$prog" $what --last --count 100000
    done
    # 16384 ints are 64 KiB, doubling's last size: twice that takes the
    # ring, so the two sides run different transports and must still meet.
    [ $what = op ] && continue
    for np in 4 8; do
        check "$np pretend nodes of 1, count 16384, another $what on the last rank: doubling against the ring (found)" \
            sh -c '"$@" > "$0" 2>&1; rc=$?; cat "$0"; [ $rc = 0 ] && grep -q "MPI_Allreduce differs between nodes" "$0"' \
            "$tmp/o" env HAR_NODE_SIZE=1 $mpi $np "$prog" $what --last --count 16384
    done
done
done_testing
