#!/bin/sh
# Bytes sent between pretend nodes, counted below har by a PMPI shim.
. "$top_srcdir/tests/lib.sh"
shim="$top_builddir/tests/mpi/.libs/libp2pcount.so"
for cfg in "4 2" "6 3" "6 2" "4 1"; do
    set -- $cfg
    env HAR_NODE_SIZE=$2 LD_PRELOAD="$shim" $mpi $1 "$bin/mpi/inter_bytes" > "$tmp/out" 2>&1
    tap_result $? "np $1, nodes of $2: each rank sends at most 2(N-1)/N of its shard + N*128 bytes" "$tmp/out"
done
done_testing
