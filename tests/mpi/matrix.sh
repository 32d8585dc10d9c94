#!/bin/sh
# The correctness matrix through har's host path: every served type and op,
# odd counts and counts above the slot, MPI_IN_PLACE, several communicators,
# one node and pretend nodes (rails, leader), every inter-node transport
# (--expect across: the one the call's size takes), with the serving path
# asserted. Full matrix up to 4 ranks, seeded samples above.
. "$top_srcdir/tests/lib.sh"
prog="$bin/mpi/check_allreduce"
counts=0,1,7,63,64,1000,65537,300001
seed=$(test_seed)
echo "# seed $seed (HAR_TEST_SEED=$seed repeats the sampled runs)"

check "np 1: har leaves a one-rank communicator to the MPI" \
    $mpi 1 "$prog" --counts 1,1000 --expect mpi
check "np 2 one node: full matrix on the host segment" \
    $mpi 2 "$prog" --counts $counts --expect host_segment
check "np 2 one node: small calls one-shot" \
    $mpi 2 "$prog" --counts 1,7,63,64,1000 --expect one_shot --comms 2
check "np 3 one node: two-shot forced, every communicator" \
    env HAR_ONE_SHOT_MAX=0 $mpi 3 "$prog" --counts $counts --expect two_shot
check "np 4 as 2 nodes of 2: rails, doubling and ring" \
    env HAR_NODE_SIZE=2 $mpi 4 "$prog" --counts $counts --expect rails,across --comms 2
check "np 4 as nodes of 3+1: leader, doubling and ring" \
    env HAR_NODE_SIZE=3 $mpi 4 "$prog" --counts $counts --expect leader,across --comms 2
check "np 4 as 4 nodes of 1: doubling and ring between single ranks" \
    env HAR_NODE_SIZE=1 $mpi 4 "$prog" --counts 1,7,1000,65537 --expect rails,across --comms 2
# MPI_Iallreduce across nodes: har's blocking path in a fiber, completed
# by MPI_Wait, MPI_Test, MPI_Waitall and MPI_Testany in turn; the cases
# har hands to the MPI are the MPI's own non-blocking calls.
check "np 4 as 2 nodes of 2, MPI_Iallreduce: rails, progressed by the completion calls" \
    env HAR_NODE_SIZE=2 $mpi 4 "$prog" --nonblocking --counts $counts --expect rails,progressed,across --comms 2
check "np 3 as nodes of 2+1, MPI_Iallreduce: leader, progressed by the completion calls" \
    env HAR_NODE_SIZE=2 $mpi 3 "$prog" --nonblocking --counts $counts --expect leader,progressed,across --comms 2
check "np 4 as 4 nodes of 1, MPI_Iallreduce: the ring streams the application's buffers, progressed by the completion calls" \
    env HAR_NODE_SIZE=1 $mpi 4 "$prog" --nonblocking --counts 1,7,1000,65537 --expect rails,progressed,across --comms 2
# Recursive doubling at every size (chunked calls too) on 3, 5, 6 and 7
# nodes, no power of two: the ranks past it hand their data in and get
# the result back; and the ring at every size.
for np in 3 5 6 7; do
    check "np $np as nodes of 1, HAR_INTER=doubling: sampled (seed $seed)" \
        env HAR_NODE_SIZE=1 HAR_INTER=doubling $mpi $np "$prog" --counts $counts --sample 12 --seed "$seed" --expect rails,doubling
done
# Alone on its node, a rank's ring streams: it reads the input and writes
# the result itself, piece by piece (HAR_CHECK keeps the copies: it
# verifies whole blocks in har's memory).
check "np 3 as nodes of 1, HAR_INTER=ring: streamed, sampled (seed $seed)" \
    env HAR_NODE_SIZE=1 HAR_INTER=ring $mpi 3 "$prog" --counts $counts --sample 12 --seed "$seed" --expect rails,ring,streamed
check "np 2 as nodes of 1, HAR_INTER=ring, 4 KiB slots: streamed, full matrix, many chunks" \
    env HAR_NODE_SIZE=1 HAR_INTER=ring HAR_SLOT_BYTES=4K $mpi 2 "$prog" --counts $counts --expect rails,ring,streamed --comms 2
check_fails "HAR_CHECK=1: the ring of a rank alone on its node does not stream" "FAIL rank" \
    env HAR_CHECK=1 HAR_NODE_SIZE=1 HAR_INTER=ring $mpi 2 "$prog" --counts 1000 --types int --no-mpi-cases --expect streamed
check "np 4 as 2 nodes of 2, HAR_DOUBLING_MAX=0: the ring at every size" \
    env HAR_NODE_SIZE=2 HAR_DOUBLING_MAX=0 $mpi 4 "$prog" --counts 1,1000 --expect rails,ring --comms 2
check_fails "a wrong --expect fails (the ring for a small call)" "FAIL rank" \
    env HAR_NODE_SIZE=1 $mpi 2 "$prog" --counts 7 --types int --no-mpi-cases --expect ring
# HAR_INTER=mpi inherits the MPI's own reductions: Debian's Open MPI 4.1.4
# sums 8- and 16-bit integers wrongly (op/avx) and gets MPI_UNSIGNED_LONG
# min/max wrong; Debian's MPICH 4.0.2 compares unsigned 32- and 64-bit
# integers as signed in min/max. This run keeps to types both reduce right.
check "np 4 as 2 nodes of 2, inter-node by the MPI (HAR_INTER=mpi)" \
    env HAR_NODE_SIZE=2 HAR_INTER=mpi $mpi 4 "$prog" --counts 1,1000,65537 --expect rails,inter_mpi --comms 2 \
    --types int,int32,int64,long,float,double,c_bool,byte
# HAR_INTER=nccl where NCCL cannot carry the blocks (no GPU here, or a har
# built without CUDA): one warning on rank 0, and har's own transports by
# size, every result checked.
check "np 4 as 2 nodes of 2, HAR_INTER=nccl without NCCL: doubling and ring instead" \
    env HAR_NODE_SIZE=2 HAR_INTER=nccl HAR_NCCL=0 $mpi 4 "$prog" --counts 1,1000,65537 --expect rails,across --comms 2
[ "$(grep -c "warning: HAR_INTER=nccl: NCCL cannot carry blocks between nodes on every rank" "$tmp/out")" = 1 ]
tap_after $? "HAR_INTER=nccl without NCCL: rank 0 says so once (the later communicators counted), naming why" "$tmp/out"
check "np 4, 4 KiB slots: many chunks per call, every communicator" \
    env HAR_SLOT_BYTES=4K $mpi 4 "$prog" --counts 1,1000,65537 --expect host_segment
check "np 2, two-shot, 3 reduction threads per rank (results must not change)" \
    env HAR_ONE_SHOT_MAX=0 HAR_REDUCE_THREADS=3 HAR_SLOT_BYTES=4M $mpi 2 "$prog" --counts 300001,1000003 --expect two_shot --comms 2
# The test build's fake engine (src/engines/fake_engine.c): registered by its line in
# src/core/paths.h alone, served only when forced, never otherwise.
check "np 3, HAR_ALGO=fake: the test build's fake engine serves every type and op" \
    env HAR_ALGO=fake HAR_REQUIRE_PATH=fake $mpi 3 "$prog" --counts 1,7,1000,65537 --expect fake --comms 3 --no-mpi-cases
check "np 3 without HAR_ALGO: the fake engine serves nothing" \
    $mpi 3 "$prog" --counts 1,1000 --sample 4 --seed "$seed" --expect host_segment --no-mpi-cases
check "np 3, HAR_REQUIRE_PATH=host_segment accepts what har serves" \
    env HAR_REQUIRE_PATH=host_segment $mpi 3 "$prog" --counts 1,1000 --no-mpi-cases --sample 4 --seed "$seed"
check_fails "HAR_REQUIRE_PATH=ring fails calls served another way" "not ring (HAR_REQUIRE_PATH)" \
    env HAR_REQUIRE_PATH=ring $mpi 2 "$prog" --counts 7 --no-mpi-cases --sample 50 --seed "$seed"
check_fails "HAR_TEST_CORRUPT=1:3 (one element on rank 1) is caught" "FAIL rank 1" \
    env HAR_TEST_CORRUPT=1:3 $mpi 2 "$prog" --counts 7 --no-mpi-cases --sample 20 --seed "$seed"
for np in 5 6 7 8; do
    for node in 2 3; do
        check "np $np as nodes of $node: sampled (seed $seed)" \
            env HAR_NODE_SIZE=$node $mpi $np "$prog" --counts $counts --sample 25 --seed "$seed" --expect across --comms 2
    done
done
check "np 6 as nodes of 4+2: leader mode, sampled (seed $seed)" \
    env HAR_NODE_SIZE=4 $mpi 6 "$prog" --counts $counts --sample 25 --seed "$seed" --expect leader,across --comms 2
check "np 8 as nodes of 4: rails, sampled (seed $seed)" \
    env HAR_NODE_SIZE=4 $mpi 8 "$prog" --counts $counts --sample 25 --seed "$seed" --expect rails,across --comms 2
# Device engines size their kernels by the job's ranks on each machine
# (any may share a GPU): counted at MPI_Init over the world, pretend nodes
# and every communicator alike.
env HAR_VERBOSE=2 HAR_NODE_SIZE=2 $mpi 4 "$prog" --counts 7 --sample 100 --seed "$seed" --comms 2 --no-mpi-cases > "$tmp/out" 2>&1
[ "$(grep -c '4 ranks of the job on this machine' "$tmp/out")" = 4 ]
tap_result $? "np 4 as 2 nodes of 2: every rank counts the job's 4 ranks on this machine" "$tmp/out"
check "np 6 one node: sampled (seed $seed)" \
    $mpi 6 "$prog" --counts $counts --sample 25 --seed "$seed" --expect host_segment
done_testing
