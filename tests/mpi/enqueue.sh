#!/bin/sh
# har_allreduce_enqueue where the kernels cannot serve it (no GPU: host
# buffers, the legacy default stream): the blocking all-reduce serves it,
# results exact, bad input refused as MPI_Allreduce refuses it. On device
# buffers: tests/gpu/gpu.sh.
. "$top_srcdir/tests/lib.sh"
prog="$bin/mpi/enqueue_host"
seed=$(test_seed)
echo "# seed $seed"
for np in 2 3 4; do
    check "$np ranks, host buffers: 600 calls on 2 or 3 communicators, random sizes, types and ops, in place or not, every result exact; bad input as MPI_Allreduce" \
        $mpi $np "$prog" --calls 600 --seed $seed
done
done_testing
