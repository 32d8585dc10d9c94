#!/bin/sh
# Device buffers through har on a machine with GPUs: the correctness matrix
# on device memory for each way ranks can sit on GPUs and each start-up
# order, each engine and its fallbacks, and memory-ordering stress. Skipped
# (visibly) without CUDA or a GPU, unless HAR_TEST_REQUIRE_GPU=1 makes that
# a failure. Where an MPS server serves this process's contexts (as
# scripts/gpu-run arranges), 3 to 9 ranks share one GPU through the
# kernels; without one, ranks sharing a GPU time-slice and those cases are
# skipped, visibly (HAR_TEST_REQUIRE_MPS=1 makes that a failure).
. "$top_srcdir/tests/lib.sh"
prog="$bin/gpu/check_allreduce_gpu"
stress="$bin/gpu/stress"
gpu_suite "$stress"
ngpu=$(nvidia-smi -L 2>/dev/null | wc -l)
counts=1,7,63,64,1000,65537,300001
# The types the kernels reduce; the others take the host segment (checked below).
ktypes="--types float,double,int,unsigned,long,unsigned_long,long_long,unsigned_long_long,int32,uint32,int64,uint64"
# What NCCL reduces: those types with sum, prod, min and max.
ncclops="--types float,double,int,unsigned,long,unsigned_long,int32,uint32,int64,uint64 --ops sum,prod,min,max"
seed=$(test_seed)
echo "# $ngpu GPU(s), seed $seed"
# Each rank sees only the GPU of its local rank, as some schedulers arrange.
own_gpu='CUDA_VISIBLE_DEVICES=$(( ${OMPI_COMM_WORLD_LOCAL_RANK:-${MPI_LOCALRANKID:-0}} % '$ngpu' )) exec "$0" "$@"'
have_nccl=0
$mpi 2 "$top_builddir/har-info" > "$tmp/info" 2>&1
grep -q "NCCL: [0-9]" "$tmp/info" && [ "$ngpu" -ge 2 ] && have_nccl=1
mps=0
grep -q "MPS serves every rank" "$tmp/info" && mps=1
echo "# MPS: $( [ $mps = 1 ] && echo "serves this job's contexts (${CUDA_MPS_PIPE_DIRECTORY:-/tmp/nvidia-mps})" || echo "not running")"
# Without the kernels, the engine that serves device buffers of one GPU per rank.
if [ $have_nccl = 1 ]; then no_ipc=nccl; no_ipc_types="$ncclops"; else no_ipc=host_segment; no_ipc_types=""; fi

# With one GPU the kernel tests let ranks share it: under MPS by default,
# without it by HAR_IPC_SHARED_GPU=1 (correct but slow, as their kernels
# time-slice, so those runs are smaller).
if [ "$ngpu" -ge 2 ] || [ $mps = 1 ]; then share=""; big=1; else share="HAR_IPC_SHARED_GPU=1"; big=0; fi
[ "$ngpu" -ge 2 ] || [ $mps = 1 ] || echo "# one GPU without MPS: the kernel cases time-slice, so they are sampled smaller"
full="--counts $counts"; [ $big = 1 ] || full="--counts $counts --sample 6 --seed $seed"
check "2 ranks on $ngpu GPU(s): matrix through the CUDA IPC kernels" \
    env $share HAR_REQUIRE_PATH=ipc $mpi 2 "$prog" --device $full $ktypes --no-mpi-cases --expect ipc
check "2 ranks, every communicator's first call on host memory before CUDA: the kernels still serve" \
    env $share $mpi 2 "$prog" --device --host-first --counts $counts --sample 3 --seed $seed $ktypes --no-mpi-cases --expect ipc
# The push kernels: calls up to HAR_DEVICE_PUSH_MAX (64 KiB) on one node,
# every type and op the kernels reduce, in place and not.
check "2 ranks on $ngpu GPU(s): calls to 64 KiB by the push kernels (no barrier, no host step)" \
    env $share $mpi 2 "$prog" --device --counts 1,7,63,64,1000,8191 $ktypes --no-mpi-cases --expect ipc,push
check "2 ranks, HAR_DEVICE_PUSH_MAX=0: the same calls by the barrier kernels" \
    env $share HAR_DEVICE_PUSH_MAX=0 $mpi 2 "$prog" --device --counts 1,7,1000,8191 --sample 20 --seed $seed $ktypes --no-mpi-cases --expect ipc,one_shot
for what in count type op; do
    check "2 ranks, another $what on rank 1 on the push kernels: found there, every rank told, no time-out" \
        sh -c '"$@" > "$0" 2>&1; rc=$?; cat "$0"; [ $rc = 0 ] && grep -q "MPI_Allreduce differs between ranks" "$0" && grep -q "at step push" "$0"' \
        "$tmp/o" env $share HAR_TIMEOUT=60 $mpi 2 "$bin/gpu/mismatch_gpu" $what
done
# A call launches 4 blocks at least, one more per 512 lines from 2048
# (har_dev_push_grid). 1000 ints are 500 lines, one block's; rank 1's 2000
# take two blocks': a block with lines on one rank and none on the other
# must still end, and the difference be found. 3000 ints launch 4 blocks,
# rank 1's 6000 launch 6: its blocks 4 and 5 wait for headers rank 0
# never writes, and must end on block 0's record of the difference.
for run in "1000:that puts lines on more of the push kernels' blocks" "3000:whose call launches more of the push kernels' blocks"; do
    n=${run%%:*} which=${run#*:}
    check "2 ranks, another count on rank 1 $which: found, every rank told, no time-out" \
        sh -c '"$@" > "$0" 2>&1; rc=$?; cat "$0"; [ $rc = 0 ] && grep -q "MPI_Allreduce differs between ranks" "$0" && grep -q "at step push" "$0"' \
        "$tmp/o" env $share HAR_TIMEOUT=60 $mpi 2 "$bin/gpu/mismatch_gpu" count --count $n
    # The same started by MPI_Iallreduce, and a blocking call made before
    # the wait: nothing waits on the started call's kernels then, so its
    # blocks must end by themselves.
    check "2 ranks, another count on rank 1 $which, by MPI_Iallreduce, a blocking call before its wait: it ends with its class, no time-out" \
        sh -c '"$@" > "$0" 2>&1; rc=$?; cat "$0"; [ $rc = 0 ] && grep -q "differs between ranks" "$0"' \
        "$tmp/o" env $share HAR_TIMEOUT=60 $mpi 2 "$bin/gpu/mismatch_gpu" count --count $n --started
    # The same queued by har_allreduce_enqueue: no host waits for it, so
    # the kernels' blocks end by themselves, the streams drain, and the
    # watch thread finds the record.
    check "2 ranks, another count on rank 1 $which, queued on a stream (har_allreduce_enqueue): the streams drain, the next call fails with the class, no time-out" \
        sh -c '"$@" > "$0" 2>&1; rc=$?; cat "$0"; [ $rc = 0 ] && grep -q "differs between ranks" "$0" && grep -q "at step enqueued" "$0" && [ "$(grep -c "its stream: cudaSuccess" "$0")" = 2 ]' \
        "$tmp/o" env $share HAR_TIMEOUT=60 $mpi 2 "$bin/gpu/mismatch_gpu" count --count $n --enqueue
done
# Past them to HAR_DEVICE_AHEAD_MAX (1 MiB), the barrier kernels go ahead
# too: no rank waits for its peers on the host, and the first barrier
# carries each call's count and signature. A differing call of those sizes
# is found there; one whose peer went into the push kernels (another size)
# is found by the host from the peers' posted records.
for what in count type op; do
    check "2 ranks, another $what on rank 1 at 120 KiB (barrier kernels gone ahead): found, every rank told, no time-out" \
        sh -c '"$@" > "$0" 2>&1; rc=$?; cat "$0"; [ $rc = 0 ] && grep -q "MPI_Allreduce differs between ranks" "$0" && grep -q "at step ahead" "$0"' \
        "$tmp/o" env $share HAR_TIMEOUT=60 $mpi 2 "$bin/gpu/mismatch_gpu" $what --count 30000
done
check "2 ranks, 40 KiB on rank 0 (push kernels) and 80 KiB on rank 1 (barrier kernels), both gone ahead: found from the records, no time-out" \
    sh -c '"$@" > "$0" 2>&1; rc=$?; cat "$0"; [ $rc = 0 ] && grep -q "MPI_Allreduce differs between ranks" "$0"' \
    "$tmp/o" env $share HAR_TIMEOUT=60 $mpi 2 "$bin/gpu/mismatch_gpu" count --count 10000
check "2 ranks, HAR_DEVICE_AHEAD_MAX=0: calls of 64 KiB to 1 MiB after an arrival on the host" \
    env $share HAR_DEVICE_AHEAD_MAX=0 $mpi 2 "$prog" --device --counts 16385,65537,131071 --sample 10 --seed $seed $ktypes --no-mpi-cases --expect ipc
check "2 ranks: 8- and 16-bit types, bool and byte take the host segment" \
    env $share $mpi 2 "$prog" --device --counts 1,1000,65537 --types int8,uint16,short,c_bool,byte --no-mpi-cases --expect host_segment
check "2 ranks: two-shot kernels forced" \
    env $share HAR_DEVICE_ONE_SHOT_MAX=0 HAR_REQUIRE_PATH=ipc $mpi 2 "$prog" --device $full $ktypes --no-mpi-cases --expect ipc,two_shot
check "2 ranks, 1 MiB device slots: chunked calls (sampled, seed $seed)" \
    env $share HAR_DEVICE_SLOT_BYTES=1M $mpi 2 "$prog" --device --counts 65537,300001,1000003 --sample 8 --seed $seed $ktypes --no-mpi-cases --expect ipc
# (world and its duplicate only: a subset of ranks on separate GPUs may use IPC)
if [ $mps = 1 ]; then
    check "3 ranks sharing GPUs under MPS, HAR_IPC_SHARED_GPU=0: host segment (NCCL refuses shared GPUs)" \
        env HAR_IPC_SHARED_GPU=0 HAR_REQUIRE_PATH=host_segment $mpi 3 "$prog" --device --counts 1,1000,65537 --sample 6 --seed $seed --comms 2 --no-mpi-cases --expect host_segment
else
    check "3 ranks sharing GPUs without MPS: host segment (kernels would time-slice, NCCL refuses)" \
        env HAR_REQUIRE_PATH=host_segment $mpi 3 "$prog" --device --counts 1,1000,65537 --sample 6 --seed $seed --comms 2 --no-mpi-cases --expect host_segment
    check "3 ranks sharing GPUs without MPS, HAR_IPC_SHARED_GPU=1: kernels, and one warning" \
        env HAR_IPC_SHARED_GPU=1 HAR_REQUIRE_PATH=ipc $mpi 3 "$prog" --device --counts 1,1000,65537 --sample 12 --seed $seed $ktypes --no-mpi-cases --expect ipc
    grep -q "HAR_IPC_SHARED_GPU=1 without MPS" "$tmp/out"
    tap_after $? "HAR_IPC_SHARED_GPU=1 without MPS is warned about" "$tmp/out"
fi
# Several ranks on one GPU under MPS: the kernels of all of them run side by
# side, and every block of every rank must be resident at once (the grid
# the node agrees on); sizes past 1 MiB hung before that.
if [ $mps = 0 ]; then
    if [ "${HAR_TEST_REQUIRE_MPS:-0}" = 1 ]; then
        tap_report 1 "MPS cases: HAR_TEST_REQUIRE_MPS=1 but no MPS server serves this job" "$tmp/info"
    else
        tap_skip "2, 3, 4, 8 and 9 ranks sharing one GPU through the kernels" "no MPS server (scripts/gpu-run starts one)"
    fi
else
    mcounts=1,7,1000,65537,300001,1048577
    for np in 2 3 4 8; do
        check "$np ranks sharing a GPU under MPS: matrix through the kernels to 8 MiB (sampled, seed $seed)" \
            env HAR_TIMEOUT=120 HAR_REQUIRE_PATH=ipc $mpi $np "$prog" --device --counts $mcounts --sample 5 --seed $seed $ktypes --no-mpi-cases --expect ipc
    done
    for np in 3 4 8; do
        check "$np ranks sharing a GPU under MPS: the push kernels, every type and op (sampled, seed $seed)" \
            env HAR_TIMEOUT=120 $mpi $np "$prog" --device --counts 1,7,1000,8191 --sample 8 --seed $seed $ktypes --comms 2 --no-mpi-cases --expect ipc,push
    done
    for np in 4 8; do
        check "stress, $np ranks under MPS: 100000 calls to 16 KiB on the push kernels, random delays, every result checked" \
            env HAR_TIMEOUT=120 $mpi $np "$stress" --iters 100000 --small --seed $seed --expect push
    done
    for np in 3 4 8; do
        check "$np ranks sharing a GPU under MPS: 64 KiB to 1 MiB on the barrier kernels gone ahead, every type and op (sampled, seed $seed)" \
            env HAR_TIMEOUT=120 $mpi $np "$prog" --device --counts 16385,65537,131071 --sample 8 --seed $seed $ktypes --comms 2 --no-mpi-cases --warm --expect ipc,ahead
    done
    for run in 4:20000 8:10000; do
        np=${run%:*} iters=${run#*:}
        check "stress, $np ranks under MPS: $iters calls of 64 KiB to 1 MiB on the barrier kernels gone ahead, random delays, every result checked" \
            env HAR_TIMEOUT=120 $mpi $np "$stress" --iters $iters --medium --seed $seed --expect ipc --expect ahead
    done
    # MPI_Iallreduce on a communicator a blocking call set up: har's own
    # kernels serve it (calls that go ahead), the request completes when
    # they end; several in flight, every completion call; with
    # HAR_LAUNCH_THREAD=1 some calls hand their launch to har's thread, the
    # others, after the longer delays, find it asleep and launch themselves.
    for np in 2 4 8; do
        check "stress, $np ranks under MPS: 100000 MPI_Iallreduce to 16 KiB, up to 8 in flight on the push kernels, random completion calls and delays, every result checked" \
            env HAR_TIMEOUT=120 HAR_LAUNCH_THREAD=1 $mpi $np "$stress" --iters 100000 --small --nonblocking 8 --seed $seed --expect push --some launcher
    done
    # A started call runs on har's own stream: the input a kernel on the
    # legacy default stream is still writing must land first.
    for np in 4 8; do
        check "stress, $np ranks under MPS: 20000 MPI_Iallreduce to 16 KiB, input still written on the legacy default stream in 1 call in 4, up to 8 in flight, every result checked" \
            env HAR_TIMEOUT=120 HAR_LAUNCH_THREAD=1 $mpi $np "$stress" --iters 20000 --small --nonblocking 8 --late-input --seed $seed --expect push --some launcher
    done
    for run in 2:20000 4:20000 8:10000; do
        np=${run%:*} iters=${run#*:}
        check "stress, $np ranks under MPS: $iters MPI_Iallreduce of 64 KiB to 1 MiB, up to 8 in flight on the barrier kernels gone ahead, every result checked" \
            env HAR_TIMEOUT=120 HAR_LAUNCH_THREAD=1 $mpi $np "$stress" --iters $iters --medium --nonblocking 8 --seed $seed --expect ipc --expect ahead --some launcher
    done
    # Past HAR_DEVICE_AHEAD_MAX non-blocking calls still go ahead (to
    # HAR_DEVICE_START_MAX), where blocking ones wait at the arrival; a rank
    # whose buffers are on the host joins on copies; where every rank's
    # are, no rank went ahead and the MPI serves the call (--expect
    # iallreduce: every call reached har's wrapper, so that --refuse has
    # something to refuse).
    for run in 2:2000 4:2000 8:1000; do
        np=${run%:*} iters=${run#*:}
        check "stress, $np ranks under MPS: $iters MPI_Iallreduce of 1 to 8 MiB, up to 8 in flight on the barrier kernels gone ahead, every result checked" \
            env HAR_TIMEOUT=120 HAR_LAUNCH_THREAD=1 $mpi $np "$stress" --iters $iters --large --nonblocking 8 --seed $seed --expect ipc --expect ahead --some launcher
    done
    check "stress, 4 ranks under MPS: 1000 blocking calls of 1 to 8 MiB, after an arrival on the host, every result checked" \
        env HAR_TIMEOUT=120 $mpi 4 "$stress" --iters 1000 --large --seed $seed --expect ipc
    check "stress, 4 ranks under MPS: 1000 MPI_Iallreduce of 1 to 8 MiB, odd ranks on host buffers joining the kernels on copies, every result checked" \
        env HAR_TIMEOUT=120 $mpi 4 "$stress" --iters 1000 --large --nonblocking 4 --host-buffers odd --seed $seed --expect ipc --expect ahead
    check "stress, 4 ranks under MPS: 500 MPI_Iallreduce of 1 to 8 MiB on host buffers everywhere after a device set-up: the MPI serves them, every result checked" \
        env HAR_TIMEOUT=120 $mpi 4 "$stress" --iters 500 --large --nonblocking 4 --host-buffers all --seed $seed --expect iallreduce --refuse ipc --refuse host_segment
    # har_allreduce_enqueue: calls queued on the application's streams
    # between its kernels, checked on the GPU; and a rank killed while its
    # peers' calls are queued.
    if [ -x "$bin/gpu/enqueue" ]; then
        for run in 2:100000 4:100000 8:30000; do
            np=${run%:*} iters=${run#*:}
            check "enqueue, $np ranks under MPS: $iters all-reduces queued on three streams between the application's kernels, every type and op to 64 KiB, some blocking, some on host buffers, random delays; then a CUDA graph of 8 replayed 2000 times; every result checked" \
                env HAR_TIMEOUT=120 $mpi $np "$bin/gpu/enqueue" --iters $iters --seed $seed --graph 8 --replays 2000
        done
        check "enqueue, 4 ranks under MPS: 20000 calls on three streams the application does not order (no shared data), har ordering its kernels across them on the GPU; every result checked" \
            env HAR_TIMEOUT=120 $mpi 4 "$bin/gpu/enqueue" --iters 20000 --seed $seed --unordered
        check "enqueue, 4 ranks under MPS as 2 pretend nodes of 2: every call har's blocking one once the stream's work is done, a capture refused; every result checked" \
            env HAR_TIMEOUT=120 HAR_NODE_SIZE=2 $mpi 4 "$bin/gpu/enqueue" --iters 3000 --seed $seed --across --graph 8
        check_kill_enqueued() {
            local out
            out=$(timeout 90 $mpi 4 "$bin/gpu/enqueue" --kill-at 500 --seed $seed 2>&1)
            echo "$out" | grep -E '^enqueue|har' | head -20
            # The failed call's MPI error string is har's class ("a peer ...
            # reported a failure"); har's error text on each survivor names
            # the death.
            [ "$(echo "$out" | grep -c 'failed at call')" = 3 ] && [ "$(echo "$out" | grep -c 'streams ended')" = 3 ] &&
                [ "$(echo "$out" | grep -cE 'error: rank [023]: rank 1 \(world rank 1, .*\) died')" = 3 ]
        }
        check "enqueue, 4 ranks under MPS: a rank killed while its peers' calls are queued; every survivor's streams end and its next call fails naming the death" \
            check_kill_enqueued
    fi
    # Under MPI_THREAD_MULTIPLE the MPI serves them (staged), and blocking
    # calls wait for the arrival, on the kernels unless another call of
    # the process was in progress: 4 threads a rank, each on its own
    # communicator, buffers made and freed (cudaFree) around every call.
    check "3 ranks under MPS, 4 threads each on its own communicator (MPI_THREAD_MULTIPLE): the blocking calls on the kernels or, beside another, the host segment, MPI_Iallreduce staged, every result checked" \
        env HAR_TIMEOUT=60 $mpi 3 "$bin/gpu/requests_gpu" threads --device --seed $seed --expect staged --blocking-by ipc,host_segment
    for case in inflight deadlock crossed persistent; do
        check "3 ranks under MPS, MPI_Iallreduce after a blocking call, $case: har's kernels serve every predefined type (the derived types staged beside them)" \
            env HAR_TIMEOUT=60 $mpi 3 "$bin/gpu/requests_gpu" $case --device --seed $seed --expect har:ipc
    done
    for case in inflight persistent; do
        check "4 ranks under MPS, $case, the communicator set up by a blocking call on host buffers after a non-blocking device call the MPI served: har's kernels serve the calls after it" \
            env HAR_TIMEOUT=60 $mpi 4 "$bin/gpu/requests_gpu" $case --device --seed $seed --expect har:ipc --setup-host
    done
    # No blocking call at all, CUDA before MPI_Init (as OSU's benchmarks
    # start): the world is set up inside MPI_Init, the first started calls
    # set the node up for device buffers in a fiber (the host segment serves
    # them), and the later ones go ahead on the kernels.
    for case in inflight persistent; do
        check "4 ranks under MPS, $case, CUDA before MPI_Init and no blocking call: the first started calls set the node up for device buffers in a fiber, the later ones on har's kernels" \
            env HAR_TIMEOUT=60 $mpi 4 "$bin/gpu/requests_gpu" $case --device --cuda-first --seed $seed --expect har:ipc,host_segment --setup-none --progressed some
    done
    check "3 ranks under MPS, deadlock, CUDA before MPI_Init and no blocking call: rank 0's started call before its MPI_Send, rank 1's after its MPI_Recv, the set-up in their fibers" \
        env HAR_TIMEOUT=60 $mpi 3 "$bin/gpu/requests_gpu" deadlock --device --cuda-first --seed $seed --expect har:host_segment --setup-none --progressed all
    # Across pretend nodes of 2 the started calls run har's blocking path
    # in a fiber, moved on by the completion calls: within each node the
    # host segment (not the kernels, which wait on the GPU), the ring or
    # the doubling between.
    for case in inflight deadlock crossed persistent; do
        check "4 ranks under MPS as 2 nodes of 2, $case: every started call of a predefined type on har's blocking path across nodes, moved on by the completion calls" \
            env HAR_TIMEOUT=60 HAR_NODE_SIZE=2 $mpi 4 "$bin/gpu/requests_gpu" $case --device --seed $seed --expect har:host_segment --across
    done
    # Under MPI_THREAD_MULTIPLE har's thread moves them, each in the CUDA
    # context its poster had current; rank 0 computing with no MPI call
    # while its peers' waits end.
    for case in inflight threads unattended; do
        check "4 ranks under MPS as 2 nodes of 2, MPI_THREAD_MULTIPLE, $case: every started call on har's blocking path across nodes, moved by har's thread" \
            env HAR_TIMEOUT=60 HAR_NODE_SIZE=2 $mpi 4 "$bin/gpu/requests_gpu" $case --device --seed $seed --expect har:host_segment --across --thread-multiple
    done
    for run in 4:400 8:200; do
        np=${run%:*} rounds=${run#*:}
        check "$np ranks under MPS, $((rounds / 2)) rounds of 2 persistent all-reduces started and completed by random calls: har's kernels serve every start" \
            env HAR_TIMEOUT=60 $mpi $np "$bin/gpu/requests_gpu" persistent --device --rounds $rounds --seed $seed --expect har:ipc
    done
    check "stress, 4 ranks under MPS: input still written on the legacy default stream in 1 call in 4, every result checked" \
        env HAR_TIMEOUT=120 $mpi 4 "$stress" --iters 20000 --small --late-input --seed $seed --expect push
    check "3 ranks under MPS, another count on the last rank on the push kernels: found, no time-out" \
        sh -c '"$@" > "$0" 2>&1; rc=$?; cat "$0"; [ $rc = 0 ] && grep -q "at step push" "$0"' \
        "$tmp/o" env HAR_TIMEOUT=60 $mpi 3 "$bin/gpu/mismatch_gpu" count --last
    check "4 ranks under MPS, two-shot forced, 1 MiB device slots: chunks of many blocks" \
        env HAR_TIMEOUT=120 HAR_DEVICE_ONE_SHOT_MAX=0 HAR_DEVICE_SLOT_BYTES=1M HAR_REQUIRE_PATH=ipc $mpi 4 "$prog" --device --counts 300001,4194305 --sample 3 --seed $seed $ktypes --no-mpi-cases --expect ipc,two_shot
    check "8 ranks under MPS as 2 pretend nodes of 4: kernels, rails, doubling and the ring carry device data" \
        env HAR_TIMEOUT=120 HAR_NODE_SIZE=4 HAR_DEVICE_HOST_MAX=0 $mpi 8 "$prog" --device --counts $mcounts --sample 6 --seed $seed $ktypes --comms 2 --no-mpi-cases --expect ipc,rails,across
    for np in 4 8; do
        check "stress, $np ranks under MPS: 5000 calls, random sizes and delays, every result checked" \
            env HAR_TIMEOUT=120 HAR_REQUIRE_PATH=ipc $mpi $np "$stress" --iters 5000 --seed $seed --expect ipc
    done
    check "stress, 4 ranks under MPS beside a kernel holding half the GPU for 2 s twice: no hang" \
        env HAR_TIMEOUT=60 HAR_REQUIRE_PATH=ipc $mpi 4 "$stress" --iters 400 --seed $seed --expect ipc --hog 2
    # A ninth local rank is past the kernels' ceiling (HAR_DEV_MAX_RANKS 8):
    # NCCL where each rank has a GPU of its own, else the host segment.
    check "9 ranks sharing a GPU under MPS: past the kernels' 8, the host segment" \
        env HAR_VERBOSE=2 HAR_REQUIRE_PATH=host_segment $mpi 9 "$prog" --device --counts 1,65537 --sample 8 --seed $seed --comms 1 --no-mpi-cases --expect host_segment
    grep -q "engine ipc does not serve device buffers here: more ranks on the node than it serves" "$tmp/out"
    tap_after $? "9 ranks: HAR_VERBOSE=2 says why the kernels do not serve" "$tmp/out"
fi
if [ "$ngpu" -ge 2 ]; then
    check "2 ranks whose buffers are on the other GPU than the current one: the kernels, on the buffers' GPUs" \
        env HAR_REQUIRE_PATH=ipc $mpi 2 "$prog" --device --other-gpu --counts 1,1000,65537 --sample 3 --seed $seed $ktypes --no-mpi-cases --expect ipc
    check "2 ranks each seeing only its own GPU (no CUDA IPC): $no_ipc" \
        env $mpi 2 sh -c "$own_gpu" "$prog" --device --counts 1,1000,65537 --sample 2 --seed $seed $no_ipc_types --no-mpi-cases --expect $no_ipc
else
    tap_skip "buffers on another GPU than the current one; ranks each seeing only their own GPU" "needs 2 GPUs"
fi
check "2 pretend nodes of 1: kernels, and doubling or the ring carries device data" \
    env $share HAR_NODE_SIZE=1 HAR_DEVICE_HOST_MAX=0 $mpi 2 "$prog" --device --counts $counts --sample 2 --seed $seed $ktypes --no-mpi-cases --expect ipc,rails,across
check "4 ranks as 2 nodes of 2: kernels, rails, doubling and ring" \
    env $share HAR_NODE_SIZE=2 HAR_DEVICE_HOST_MAX=0 $mpi 4 "$prog" --device --counts $counts --sample 4 --seed $seed $ktypes --comms 2 --no-mpi-cases --expect ipc,rails,across
# Across nodes, device calls up to HAR_DEVICE_HOST_MAX (128 KiB) take the
# host segment (one copy each way), larger ones the kernels.
check "4 ranks as 2 nodes of 2, device buffers up to 128 KiB: the host segment" \
    env $share HAR_NODE_SIZE=2 $mpi 4 "$prog" --device --counts 1,1000,16384 --sample 4 --seed $seed $ktypes --comms 2 --no-mpi-cases --expect host_segment,rails,across
check "4 ranks as 2 nodes of 2, device buffers past 128 KiB: the kernels" \
    env $share HAR_NODE_SIZE=2 $mpi 4 "$prog" --device --counts 65537,300001 --sample 4 --seed $seed $ktypes --comms 2 --no-mpi-cases --expect ipc,rails,ring
check "3 pretend nodes of 1, HAR_INTER=doubling at every size: the third node's data handed in and back" \
    env $share HAR_NODE_SIZE=1 HAR_INTER=doubling HAR_DEVICE_HOST_MAX=0 $mpi 3 "$prog" --device --counts $counts --sample 3 --seed $seed $ktypes --no-mpi-cases --expect ipc,rails,doubling
check "3 ranks as nodes of 2+1: leader mode on the host segment" \
    env HAR_NODE_SIZE=2 $mpi 3 "$prog" --device --counts 1,1000,65537 --sample 3 --seed $seed --comms 2 --no-mpi-cases --expect host_segment,leader
# MPI_Iallreduce across nodes: the blocking path in a fiber, moved on by
# the completion calls, on the host segment at every size (a started call
# across nodes keeps off the kernels that wait on the GPU).
check "4 ranks as 2 nodes of 2, MPI_Iallreduce on device buffers: the host segment and the ring or doubling, progressed by the completion calls" \
    env $share HAR_NODE_SIZE=2 $mpi 4 "$prog" --device --nonblocking --counts 1,1000,65537,300001 --sample 4 --seed $seed $ktypes --comms 2 --no-mpi-cases --expect host_segment,rails,across,progressed
check "stress, 2 nodes of 2, MPI_Iallreduce in batches of up to 8 (64 KiB slots): $((iters / 5)) calls on the host segment" \
    env $share HAR_NODE_SIZE=2 HAR_SLOT_BYTES=64K HAR_DEVICE_SLOT_BYTES=1M $mpi 4 "$stress" --iters $((iters / 5)) --seed $seed --nonblocking 8 --expect host_segment --expect progressed
check "HAR_TEST_IPC_FAIL=1: the kernels' set-up fails, the node disables them alone: $no_ipc" \
    env $share HAR_TEST_IPC_FAIL=1 $mpi 2 "$prog" --device --counts 1,65537 --sample 3 --seed $seed $no_ipc_types --no-mpi-cases --expect $no_ipc
check "HAR_IPC=0: $no_ipc" \
    env HAR_IPC=0 $mpi 2 "$prog" --device --counts 1,65537 --sample 3 --seed $seed $no_ipc_types --no-mpi-cases --expect $no_ipc
check "mixed kinds (odd ranks on host buffers): host segment" \
    env HAR_REQUIRE_PATH=host_segment $mpi 2 "$prog" --device --mixed --counts 1,1000,65537 --sample 3 --seed $seed --no-mpi-cases --expect host_segment
check "mixed kinds after all-device calls, to 64 KiB: the device ranks go ahead on the push kernels, the host ranks join" \
    env $share $mpi 2 "$prog" --device --mixed-late --counts 1,1000,8191 --sample 6 --seed $seed $ktypes --no-mpi-cases --expect ipc,push
check "mixed kinds after all-device calls, 64 KiB to 1 MiB: the device ranks go ahead on the barrier kernels, the host ranks join" \
    env $share $mpi 2 "$prog" --device --mixed-late --counts 16385,65537,131071 --sample 6 --seed $seed $ktypes --no-mpi-cases --expect ipc,ahead
check "managed memory: copied like any input, host segment" \
    env HAR_REQUIRE_PATH=host_segment $mpi 2 "$prog" --managed --counts 1,1000,65537 --sample 3 --seed $seed --no-mpi-cases --expect host_segment
check "handed to the MPI: device buffers staged through host" \
    env HAR_MAX_BYTES=0 $mpi 2 "$prog" --device --counts 1,1000,65537 --sample 3 --seed $seed --expect staged \
    --types int,int32,int64,long,float,double  # the MPI's own reductions: see matrix.sh on its 8/16-bit sums
check_fails "HAR_TEST_CORRUPT on device buffers is caught" "FAIL rank 1" \
    env $share HAR_TEST_CORRUPT=1:3 $mpi 2 "$prog" --device --counts 7 --sample 20 --seed $seed --no-mpi-cases
# A process that never touches CUDA gets no CUDA library from har.
desc="a program that never touches CUDA: served by har, no libcuda in its processes"
if runs "$desc"; then
    env LD_PRELOAD="$top_builddir/.libs/libhar.so" HAR_VERBOSE=1 $mpi 2 "$bin/mpi/plain_app" > "$tmp/out" 2>&1
    [ "$(grep -c 'libcuda in the process: no' "$tmp/out")" = 2 ] && grep -q "host_segment=[1-9]" "$tmp/out"
    tap_report $? "$desc" "$tmp/out"
fi

# NCCL (HAR_NCCL names the library; har-info says whether it loads).
if [ "$ngpu" -lt 2 ]; then
    tap_skip "NCCL tests" "NCCL refuses two ranks on one GPU: needs 2 GPUs"
elif [ $have_nccl = 0 ]; then
    tap_skip "NCCL tests" "NCCL not loadable (set HAR_NCCL to its path)"
else
    check "2 ranks, HAR_ALGO=nccl: NCCL serves every type and op it has (two communicators each)" \
        env HAR_ALGO=nccl HAR_REQUIRE_PATH=nccl $mpi 2 "$prog" --device $full $ncclops --comms 2 --no-mpi-cases --expect nccl
    check "2 ranks, HAR_ALGO=nccl, first calls on host memory before CUDA: NCCL serves" \
        env HAR_ALGO=nccl $mpi 2 "$prog" --device --host-first --counts 7,65537 $ncclops --sample 2 --seed $seed --comms 2 --no-mpi-cases --expect nccl
    check "2 ranks, HAR_ALGO=nccl: bitwise and logical ops stay on the kernels (NCCL has none)" \
        env HAR_ALGO=nccl $mpi 2 "$prog" --device --counts 7,65537 --types int,uint64 --ops band,bor,bxor,land,lor,lxor --no-mpi-cases --expect ipc
    check "2 ranks, HAR_ALGO=nccl, HAR_NCCL=/nonexistent: kernels serve instead" \
        env HAR_ALGO=nccl HAR_NCCL=/nonexistent/libnccl.so.2 $mpi 2 "$prog" --device --counts 7,65537 --types float,int64 --ops sum,max --no-mpi-cases --expect ipc
    check "2 ranks, HAR_ALGO=nccl, NCCL missing on rank 1 only: the node agrees, kernels serve" \
        env HAR_ALGO=nccl $mpi 2 sh -c '[ "${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-0}}" = 1 ] && export HAR_NCCL=/nonexistent/libnccl.so.2; exec "$0" "$@"' \
        "$prog" --device --counts 7,65537 --types float --ops sum --comms 2 --no-mpi-cases --expect ipc
    check "2 ranks, HAR_ALGO=nccl, HAR_TEST_NCCL_FAIL=1: NCCL's set-up fails, the node disables it alone, kernels serve" \
        env HAR_ALGO=nccl HAR_TEST_NCCL_FAIL=1 $mpi 2 "$prog" --device --counts 7,65537 --types float --ops sum --comms 2 --no-mpi-cases --expect ipc
    check "3 ranks sharing GPUs, HAR_IPC_SHARED_GPU=1, HAR_ALGO=nccl: not a candidate, kernels" \
        env HAR_IPC_SHARED_GPU=1 HAR_ALGO=nccl $mpi 3 "$prog" --device --counts 7,65537 --types float --ops sum --comms 1 --no-mpi-cases --expect ipc
    check "2 ranks, no table, HAR_NCCL_MIN_BYTES=1M: NCCL from 1 MiB, the kernels below" \
        env HAR_NCCL_MIN_BYTES=1M $mpi 2 "$prog" --device --counts 262144,300001 --types float,int64 --ops sum,max --no-mpi-cases --expect nccl
    check "2 ranks, no table, HAR_NCCL_MIN_BYTES=1M: 1000 floats on the kernels" \
        env HAR_NCCL_MIN_BYTES=1M $mpi 2 "$prog" --device --counts 1000,65537 --types float,int64 --ops sum,max --no-mpi-cases --expect ipc
    check "stress, HAR_ALGO=nccl: 20000 calls, random sizes and delays, every result checked" \
        env HAR_ALGO=nccl HAR_REQUIRE_PATH=nccl $mpi 2 "$stress" --iters 20000 --seed $seed --expect nccl
fi
# The shipped table: each of its device rows for this machine's class and
# shape (a rank per GPU, and at least two, as scripts/gpu-run measures)
# serves its sizes by its choice.
nt=$(( ngpu < 2 ? 2 : ngpu ))
$mpi "$nt" "$top_builddir/har-info" > "$tmp/info" 2>&1
cls=$(sed -n 's/^  device buffers: //p' "$tmp/info")
echo "# device class here, $nt ranks: $cls"
rows=$(grep -v '^#' "$top_srcdir/src/plan/tuning.txt" | awk -v n="$nt" -v c="$cls" '$1 == "device" && $2 == c && $3 == n && $4 == 1')
if [ -z "$rows" ]; then
    tap_skip "the shipped tuning table on device buffers" "no rows for class '$cls', $nt ranks on one node"
else
    prev=0
    while read -r memory class local nodes max choice; do
        if [ "$max" = inf ]; then count=$((prev / 4 + 1)); else count=$((max / 4)); fi
        [ "$count" -ge 1 ] || count=1
        want=$(echo "$choice" | tr + ,); [ "$choice" = mpi ] && want=mpi,staged
        if [ "$choice" = nccl ] && [ $have_nccl = 0 ]; then
            tap_skip "shipped table row '$max $choice'" "NCCL not loadable"
            continue
        fi
        check "shipped table row '$local $nodes $max $choice': $count floats served by $want" \
            env HAR_TUNING=builtin $mpi "$nt" "$prog" --device --counts "$count" --types float --ops sum --comms 2 --no-mpi-cases --expect "$want" < /dev/null
        [ "$max" = inf ] || prev=$max
    done <<ROWS
$rows
ROWS
    check "stress with the shipped table: 20000 calls switching between its choices by size, every result checked" \
        env HAR_TUNING=builtin $mpi "$nt" "$stress" --iters 20000 --seed $seed
    check "the same, the first call on host memory before CUDA" \
        env HAR_TUNING=builtin $mpi "$nt" "$stress" --iters 20000 --seed $seed --host-first
fi
iters=100000; [ $big = 1 ] || iters=3000
check "stress: $iters calls, random sizes and delays, every result checked" \
    env $share HAR_REQUIRE_PATH=ipc $mpi 2 "$stress" --iters $iters --seed $seed --expect ipc
check "stress, first call on host memory before CUDA: $((iters / 5)) calls on the kernels" \
    env $share $mpi 2 "$stress" --iters $((iters / 5)) --seed $seed --expect ipc --host-first
check "stress, 2 nodes of 2 (kernels around the ring), 64 KiB slots: $((iters / 5)) calls" \
    env $share HAR_NODE_SIZE=2 HAR_SLOT_BYTES=64K HAR_DEVICE_SLOT_BYTES=1M HAR_INTER=ring HAR_DEVICE_HOST_MAX=0 $mpi 4 "$stress" --iters $((iters / 5)) --seed $seed --expect ipc --expect ring
check "2 nodes of 2, 64 KiB slots, HAR_DEVICE_PIPELINE=0 (one chunk at a time): the same results" \
    env $share HAR_NODE_SIZE=2 HAR_SLOT_BYTES=64K HAR_DEVICE_PIPELINE=0 $mpi 4 "$prog" --device --counts 65537,300001 --sample 4 --seed $seed $ktypes --comms 2 --no-mpi-cases --expect ipc,ring
# An MPI that moves device memory (tests/gpu/cuda_aware.c stands in for
# one): the transports between nodes get the device shards as they are, no
# host copy of har's. stand_in DESCRIPTION LINES PATTERN NP "VAR=VALUE ..."
# ARGS...: check_allreduce_gpu on device buffers under the stand-in, with
# those settings and arguments, passes, and LINES of the shim's closing
# lines ("cuda_aware shim: ...", one per rank) match PATTERN (LINES "some":
# at least one).
stand_in() {
    desc=$1 lines=$2 pattern=$3 np=$4 vars=$5
    shift 5
    runs "$desc" || return 0
    env $share HAR_DEVICE_HOST_MAX=0 $vars LD_PRELOAD="$top_builddir/tests/gpu/.libs/libcudaaware.so" \
        $mpi "$np" "$prog" --device --counts 1,1000,65537,300001 --sample 4 --seed $seed --no-mpi-cases "$@" > "$tmp/out" 2>&1
    rc=$?
    n=$(grep -c "cuda_aware shim: $pattern" "$tmp/out")
    [ $rc = 0 ] && { [ "$n" = "$lines" ] || { [ "$lines" = some ] && [ "$n" -gt 0 ]; }; }
    tap_report $? "$desc" "$tmp/out"
}
stand_in "HAR_MPI_CUDA_P2P=1 under a stand-in CUDA-aware MPI: the ring moves device memory, results checked" \
    some "[1-9][0-9]* device sends" 4 "HAR_NODE_SIZE=2 HAR_MPI_CUDA_P2P=1" $ktypes --comms 2 --expect ipc,across
stand_in "HAR_MPI_CUDA_P2P=1 under the stand-in, 3 pretend nodes of 1, HAR_INTER=doubling: device blocks reduced and copied on the GPU" \
    some "[1-9][0-9]* device sends" 3 "HAR_NODE_SIZE=1 HAR_INTER=doubling HAR_MPI_CUDA_P2P=1" $ktypes --expect ipc,doubling
# HAR_INTER=mpi hands the device shards to the MPI's MPI_Iallreduce where
# its non-blocking collectives take device memory (every rank carries a
# shard between the nodes: each says so); the types the MPIs reduce right,
# as in tests/mpi/matrix.sh.
stand_in "HAR_MPI_CUDA_NONBLOCKING=1 under the stand-in, 2 nodes of 2, HAR_INTER=mpi: the device shards go to the MPI's all-reduce as they are" \
    4 "0 device sends, 0 device receives, [1-9][0-9]* device all-reduces" 4 \
    "HAR_NODE_SIZE=2 HAR_INTER=mpi HAR_MPI_CUDA_NONBLOCKING=1" --types int,int32,int64,long,float,double --comms 2 \
    --expect ipc,inter_mpi
# HAR_INTER=nccl: NCCL carries the blocks between pretend nodes. Each
# pretend node is another host to NCCL (NCCL_HOSTID), whose ranks on one
# GPU then meet over sockets on the loopback: NCCL refuses two ranks of
# one host on one GPU.
pretend_hosts='NCCL_HOSTID=har-test-node-$(( ${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-0}} / HAR_NODE_SIZE )) exec "$0" "$@"'
if ! grep -q "NCCL: [0-9]" "$tmp/info"; then
    tap_skip "HAR_INTER=nccl tests" "NCCL not loadable (set HAR_NCCL to its path)"
else
    check "HAR_INTER=nccl, 2 pretend nodes of 2: NCCL carries the device shards between them, every type and op it has" \
        env $share HAR_NODE_SIZE=2 HAR_INTER=nccl HAR_DEVICE_HOST_MAX=0 NCCL_SOCKET_IFNAME=lo $mpi 4 sh -c "$pretend_hosts" \
        "$prog" --device --counts 1,1000,65537,300001 --sample 3 --seed $seed $ncclops --comms 2 --no-mpi-cases --expect ipc,inter_nccl
    check "HAR_INTER=nccl, 2 pretend nodes of 2, host buffers: NCCL carries the host blocks through a device copy" \
        env HAR_NODE_SIZE=2 HAR_INTER=nccl NCCL_SOCKET_IFNAME=lo $mpi 4 sh -c "$pretend_hosts" \
        "$prog" --counts 1,1000,65537,300001 --types float,int64 --ops sum,max --comms 2 --no-mpi-cases --expect host_segment,inter_nccl
    check "HAR_INTER=nccl, 2 pretend nodes of 2: another count on the second node is found by the headers before NCCL: every rank told, no hang" \
        sh -c '"$@" > "$0" 2>&1; rc=$?; cat "$0"; [ $rc = 0 ] && grep -q "MPI_Allreduce differs between nodes" "$0"' \
        "$tmp/o" env $share HAR_NODE_SIZE=2 HAR_INTER=nccl HAR_DEVICE_HOST_MAX=0 HAR_TIMEOUT=60 NCCL_SOCKET_IFNAME=lo \
        $mpi 4 sh -c "$pretend_hosts" "$bin/gpu/mismatch_gpu" count --from 2 --count 30000
    # With 3 nodes a check of each node against its neighbour would let one
    # node into NCCL, where the others never come: every rank must see it.
    check "HAR_INTER=nccl, 3 pretend nodes of 1: another op on the last node found before any rank enters NCCL: every rank gets the op's class, no hang" \
        sh -c '"$@" > "$0" 2>&1; rc=$?; cat "$0"; [ $rc = 0 ] && grep -q "MPI_Allreduce differs between nodes" "$0"' \
        "$tmp/o" env $share HAR_NODE_SIZE=1 HAR_INTER=nccl HAR_DEVICE_HOST_MAX=0 HAR_TIMEOUT=60 NCCL_SOCKET_IFNAME=lo \
        $mpi 3 sh -c "$pretend_hosts" "$bin/gpu/mismatch_gpu" op --last --count 30000
fi
check "2 pretend nodes of 1, device buffers on one, host on the other: both chunk alike" \
    env $share HAR_NODE_SIZE=1 $mpi 2 "$prog" --device --mixed --counts 1000,300001,1000003 --types float,int64 --no-mpi-cases --expect across
# A rank killed in the middle of calls on device buffers: the job ends, no
# GPU memory stays held and nothing stays in /dev/shm.
gpu_mem() { nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits | awk '{ s += $1 } END { print s }'; }
desc="a rank killed amid calls on device buffers: no GPU memory held, nothing in /dev/shm"
if runs "$desc"; then
    mem0=$(gpu_mem) shm0=$(shm_residue)
    env $share HAR_TEST_KILL=1:arrival:200 HAR_TEST_TIMEOUT=60 $mpi 2 "$stress" --iters 2000 --seed $seed > "$tmp/out" 2>&1
    sleep 2  # the driver frees a dead process's memory as it reaps it
    mem1=$(gpu_mem) shm1=$(shm_residue)
    echo "GPU memory used: $mem0 MiB before, $mem1 MiB after; stale har entries in /dev/shm: $shm0 before, $shm1 after" >> "$tmp/out"
    grep -q "HAR_TEST_KILL: world rank 1 dies" "$tmp/out" && [ "$mem1" -le $((mem0 + 64)) ] && [ "$shm1" -le "$shm0" ]
    tap_report $? "$desc" "$tmp/out"
fi
if command -v compute-sanitizer > /dev/null; then
    check "compute-sanitizer memcheck: a short run, no error" \
        env $share $mpi 2 compute-sanitizer --tool memcheck --error-exitcode 9 "$stress" --iters 50 --seed $seed --expect ipc
else
    tap_skip "compute-sanitizer memcheck" "compute-sanitizer not installed"
fi
done_testing
