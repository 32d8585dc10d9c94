#!/bin/sh
# Bytes sent between pretend nodes, counted below har by a PMPI shim.
. "$top_srcdir/tests/lib.sh"
shim="$top_builddir/tests/mpi/.libs/libp2pcount.so"
for cfg in "4 2" "6 3" "6 2" "4 1"; do
    set -- $cfg
    env HAR_NODE_SIZE=$2 LD_PRELOAD="$shim" $mpi $1 "$bin/mpi/inter_bytes" > "$tmp/out" 2>&1
    tap_result $? "np $1, nodes of $2: each rank sends at most what its transport must (doubling to 64 KiB, the ring above), in messages of at most the default HAR_RING_MESSAGE" "$tmp/out"
done
for inter in ring doubling; do
    env HAR_INTER=$inter HAR_NODE_SIZE=1 LD_PRELOAD="$shim" $mpi 3 "$bin/mpi/inter_bytes" > "$tmp/out" 2>&1
    tap_result $? "np 3, nodes of 1, HAR_INTER=$inter at every size: the bytes that transport must send, in messages of at most the default HAR_RING_MESSAGE" "$tmp/out"
done
done_testing
