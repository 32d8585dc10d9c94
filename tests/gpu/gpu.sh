#!/bin/sh
# Device buffers through har. Skipped (visibly) without CUDA or a GPU, unless
# HAR_TEST_REQUIRE_GPU=1 makes that a failure.
. "$top_srcdir/tests/lib.sh"
prog="$bin/gpu/device_allreduce"
required="${HAR_TEST_REQUIRE_GPU:-0}"
if [ ! -x "$prog" ]; then
    [ "$required" = 1 ] && { tap_result 1 "GPU tests required but har was built without CUDA"; done_testing; exit 0; }
    echo "1..0 # SKIP har built without CUDA"; exit 0
fi
"$prog" > "$tmp/probe" 2>&1
rc=$?
if [ $rc = 77 ]; then echo "1..0 # SKIP no GPU visible"; exit 0; fi
if [ $rc != 0 ]; then tap_result 1 "a GPU is required (HAR_TEST_REQUIRE_GPU=1) and none is visible" "$tmp/probe"; done_testing; exit 0; fi
check "2 ranks, device buffers, host segment" env HAR_REQUIRE_PATH=host_segment $mpi 2 "$prog" --expect host_segment
check "2 ranks, one GPU each (CUDA_VISIBLE_DEVICES per rank), host segment" \
    env HAR_REQUIRE_PATH=host_segment $mpi 2 sh -c 'CUDA_VISIBLE_DEVICES=$(( ${OMPI_COMM_WORLD_LOCAL_RANK:-${MPI_LOCALRANKID:-0}} )) exec "$0" "$@"' "$prog" --expect host_segment
check "3 ranks sharing GPUs, host segment" env HAR_REQUIRE_PATH=host_segment $mpi 3 "$prog" --expect host_segment
check "2 pretend nodes of 1 (ring carries device data)" env HAR_NODE_SIZE=1 $mpi 2 "$prog" --expect ring
check "forwarded: the MPI reduces device buffers staged through host" env HAR_MAX_BYTES=0 $mpi 2 "$prog" --expect staged
done_testing
