#!/bin/sh
# Device buffers in the calls har stages for an MPI that cannot take them:
# every wrapped collective, blocking and non-blocking (tests/mpi/
# entry/collectives.c --device: results, gaps, holes and non-roots' buffers
# checked, every call counted as *_staged), and MPI_Iallreduce and the
# persistent all-reduce several in flight, completed by every completion
# call in a random order, beside point-to-point requests, threads included
# (tests/mpi/requests.c --device). HAR_MPI_CUDA_P2P=0 and
# HAR_MPI_CUDA_REDUCE=0 make the blocking calls staged even under a
# CUDA-aware MPI; the non-blocking ones are staged by default
# (HAR_MPI_CUDA_NONBLOCKING=auto is 0). Skipped (visibly) without CUDA or a
# GPU, as gpu.sh is, unless HAR_TEST_REQUIRE_GPU=1.
. "$top_srcdir/tests/lib.sh"
req="$bin/gpu/requests_gpu"
coll="$bin/gpu/collectives_gpu"
gpu_suite "$req"
seed=$(test_seed)
echo "# seed $seed"
staged="HAR_MPI_CUDA_P2P=0 HAR_MPI_CUDA_REDUCE=0"
for np in 2 3; do
    check "$np ranks: every wrapped collective on device buffers, blocking and non-blocking, staged and right" \
        env $staged $mpi $np "$coll" --device --seed $seed --expect staged
done
for case in inflight deadlock crossed persistent threads; do
    check "MPI_Iallreduce on device buffers, $case: staged, results back on the device at completion" \
        env $staged $mpi 3 "$req" $case --device --seed $seed --expect staged
done
check "the same program on host buffers in a process with a GPU context: nothing staged" \
    $mpi 2 "$coll" --cuda-host --seed $seed --expect untouched
check_fails "--expect untouched on device buffers fails (the counters show the staging)" "expected untouched" \
    env $staged $mpi 2 "$coll" --device --seed $seed --expect untouched
done_testing
