#!/bin/sh
# Device buffers through har on a machine with GPUs: the correctness matrix
# on device memory for each way ranks can sit on GPUs, the fallbacks, and a
# memory-ordering stress. Skipped (visibly) without CUDA or a GPU, unless
# HAR_TEST_REQUIRE_GPU=1 makes that a failure.
. "$top_srcdir/tests/lib.sh"
prog="$bin/gpu/check_allreduce_gpu"
stress="$bin/gpu/stress"
required="${HAR_TEST_REQUIRE_GPU:-0}"
if [ ! -x "$stress" ]; then
    [ "$required" = 1 ] && { tap_result 1 "GPU tests required but har was built without CUDA"; done_testing; exit 0; }
    echo "1..0 # SKIP har built without CUDA"; exit 0
fi
"$stress" --probe > "$tmp/probe" 2>&1
rc=$?
if [ $rc = 77 ]; then echo "1..0 # SKIP no GPU visible"; exit 0; fi
if [ $rc != 0 ]; then tap_result 1 "a GPU is required (HAR_TEST_REQUIRE_GPU=1) and none is visible" "$tmp/probe"; done_testing; exit 0; fi
ngpu=$(nvidia-smi -L 2>/dev/null | wc -l)
counts=1,7,63,64,1000,65537,300001
seed=$(test_seed)
echo "# $ngpu GPU(s), seed $seed"
# Each rank sees only the GPU of its local rank, as some schedulers arrange.
own_gpu='CUDA_VISIBLE_DEVICES=$(( ${OMPI_COMM_WORLD_LOCAL_RANK:-${MPI_LOCALRANKID:-0}} % '$ngpu' )) exec "$0" "$@"'

check "2 ranks, one GPU each: full matrix through CUDA IPC kernels" \
    env HAR_REQUIRE_PATH=ipc $mpi 2 "$prog" --device --counts $counts --no-forwarded --expect ipc
check "2 ranks: two-shot kernels forced, every communicator" \
    env HAR_DEVICE_ONE_SHOT_MAX=0 HAR_REQUIRE_PATH=ipc $mpi 2 "$prog" --device --counts $counts --no-forwarded --expect ipc,two_shot
check "2 ranks, 1 MiB device slots: chunked calls (sampled, seed $seed)" \
    env HAR_DEVICE_SLOT_BYTES=1M $mpi 2 "$prog" --device --counts 65537,300001,1000003 --sample 4 --seed $seed --expect ipc
check "3 ranks sharing the GPUs: IPC (sampled)" \
    env HAR_REQUIRE_PATH=ipc $mpi 3 "$prog" --device --counts $counts --sample 3 --seed $seed --no-forwarded --expect ipc
check "4 ranks on one GPU (CUDA_VISIBLE_DEVICES=0): IPC (sampled)" \
    env CUDA_VISIBLE_DEVICES=0 HAR_REQUIRE_PATH=ipc $mpi 4 "$prog" --device --counts 1,1000,65537 --sample 4 --seed $seed --no-forwarded --expect ipc
if [ "$ngpu" -ge 2 ]; then
    check "2 ranks each seeing only its own GPU: host segment" \
        env HAR_REQUIRE_PATH=host_segment $mpi 2 sh -c "$own_gpu" "$prog" --device --counts 1,1000,65537 --sample 3 --seed $seed --no-forwarded --expect host_segment
else
    tap_skip "2 ranks each seeing only its own GPU" "needs 2 GPUs"
fi
check "2 pretend nodes of 1: kernels, and the ring carries device data" \
    env HAR_NODE_SIZE=1 $mpi 2 "$prog" --device --counts $counts --sample 2 --seed $seed --no-forwarded --expect ipc,rails,ring
check "4 ranks as 2 nodes of 2: kernels, rails and ring" \
    env HAR_NODE_SIZE=2 $mpi 4 "$prog" --device --counts $counts --sample 4 --seed $seed --no-forwarded --expect ipc,rails,ring
check "3 ranks as nodes of 2+1: leader mode on the host segment" \
    env HAR_NODE_SIZE=2 $mpi 3 "$prog" --device --counts 1,1000,65537 --sample 3 --seed $seed --no-forwarded --expect host_segment,leader
check "HAR_TEST_IPC_FAIL=1: the set-up check fails, the host segment serves" \
    env HAR_TEST_IPC_FAIL=1 HAR_REQUIRE_PATH=host_segment $mpi 2 "$prog" --device --counts 1,65537 --sample 3 --seed $seed --no-forwarded --expect host_segment
check "HAR_IPC=0: host segment" \
    env HAR_IPC=0 $mpi 2 "$prog" --device --counts 1,65537 --sample 3 --seed $seed --no-forwarded --expect host_segment
check "mixed kinds (odd ranks on host buffers): host segment" \
    env HAR_REQUIRE_PATH=host_segment $mpi 2 "$prog" --device --mixed --counts 1,1000,65537 --sample 3 --seed $seed --no-forwarded --expect host_segment
check "forwarded: the MPI reduces device buffers staged through host" \
    env HAR_MAX_BYTES=0 $mpi 2 "$prog" --device --counts 1,1000,65537 --sample 3 --seed $seed --expect staged
check_fails "HAR_TEST_CORRUPT on device buffers is caught" "FAIL rank 1" \
    env HAR_TEST_CORRUPT=1:3 $mpi 2 "$prog" --device --counts 7 --sample 20 --seed $seed --no-forwarded
check "stress: 100000 calls, random sizes and delays, every result checked" \
    env HAR_REQUIRE_PATH=ipc $mpi 2 "$stress" --iters 100000 --seed $seed --expect ipc
check "stress, 2 nodes of 2 (kernels around the ring): 20000 calls" \
    env HAR_NODE_SIZE=2 $mpi 4 "$stress" --iters 20000 --seed $seed --expect ring
if command -v compute-sanitizer > /dev/null; then
    check "compute-sanitizer memcheck: a short run, no error" \
        $mpi 2 compute-sanitizer --tool memcheck --error-exitcode 9 "$stress" --iters 200 --seed $seed --expect ipc
else
    tap_skip "compute-sanitizer memcheck" "compute-sanitizer not installed"
fi
done_testing
