#!/bin/sh
# Engines and plans follow what the node agrees at a call's first
# synchronisation. On a node where no rank has CUDA, a one-shot call makes
# one synchronisation step and a size handed to the MPI none; once a rank
# finds CUDA (here simulated by the test build's HAR_TEST_CUDA_AT) every
# rank starts every call with an arrival from the same call on, and a host
# one-shot call still makes one step (the arrival carries its input).
. "$top_srcdir/tests/lib.sh"
prog="$bin/mpi/check_allreduce"
arrival="$bin/mpi/arrival"
counts=0,1,7,63,64,1000,65537,300001
seed=$(test_seed)
echo "# seed $seed"
check "host node, 3 ranks: one-shot 1 step, two-shot 2, sizes for the MPI none, over 60 calls" \
    $mpi 3 "$arrival" -1
check "rank 1 finds CUDA during a call the MPI serves (call 21): all 3 ranks switch at call 22" \
    env HAR_TEST_CUDA_AT=1:21 $mpi 3 "$arrival" 21
check "rank 0 finds CUDA at call 20: the first call after the switch is one for the MPI" \
    env HAR_TEST_CUDA_AT=0:20 $mpi 2 "$arrival" 20
check "host node: one-shot calls take one step" \
    $mpi 2 "$prog" --counts 1,7,63,64,1000 --expect one_shot --comms 2 --steps 1
check "host node: sizes handed to the MPI take no step (HAR_ALGO=mpi)" \
    env HAR_ALGO=mpi $mpi 2 "$prog" --counts 1,7,1000 --types int,float,double --comms 2 --expect mpi --steps 0
# From here every rank acts as if it had CUDA from its first call on.
cuda="HAR_TEST_CUDA_AT=*:0"
check "CUDA node: host one-shot calls still take one step" \
    env $cuda $mpi 2 "$prog" --counts 1,7,63,64,1000 --expect one_shot --comms 2 --steps 1
check "CUDA node: sizes for the MPI take one step, the arrival" \
    env $cuda HAR_ALGO=mpi $mpi 2 "$prog" --counts 1,7,1000 --types int,float,double --comms 2 --expect mpi --steps 1
check "CUDA node: two-shot calls take two steps" \
    env $cuda HAR_ONE_SHOT_MAX=0 $mpi 3 "$prog" --counts 1,7,1000,65537 --expect two_shot --comms 2 --steps 2
check "CUDA node, 3 ranks: full matrix on the host segment" \
    env $cuda $mpi 3 "$prog" --counts $counts --expect host_segment
check "CUDA node, 4 ranks as 2 nodes of 2: rails, doubling and ring" \
    env $cuda HAR_NODE_SIZE=2 $mpi 4 "$prog" --counts $counts --expect rails,across --comms 2
check "CUDA node, 4 ranks as nodes of 3+1: leader, doubling and ring" \
    env $cuda HAR_NODE_SIZE=3 $mpi 4 "$prog" --counts $counts --sample 3 --seed "$seed" --expect leader,across --comms 2
check "CUDA node, 4 KiB slots: many chunks per call" \
    env $cuda HAR_SLOT_BYTES=4K $mpi 3 "$prog" --counts 1,1000,65537 --expect host_segment
check "CUDA node on one rank of two pretend nodes only (rank 0 from call 0): every result right" \
    env HAR_TEST_CUDA_AT=0:0 HAR_NODE_SIZE=2 $mpi 4 "$prog" --counts $counts --sample 3 --seed "$seed" --expect across --comms 2
done_testing
