#!/bin/sh
# MPICH's stream communicators: MPIX_Allreduce_enqueue on a CUDA stream's
# communicator is har's stream-ordered all-reduce (here, with no GPU, its
# blocking call once the stream is done), everything else on them the
# MPI's. Only where the MPI has them (MPICH 4.1 on); each stream takes a
# VCI the MPI reserves at start-up (MPIR_CVAR_CH4_RESERVE_VCIS).
. "$top_srcdir/tests/lib.sh"
prog="$bin/mpi/mpix_stream"
[ -x "$prog" ] || { echo "1..0 # SKIP the MPI has no stream communicators (MPIX_Stream: MPICH 4.1 on)"; exit 0; }
seed=$(test_seed)
echo "# seed $seed"
for np in 1 2 3 4; do
    check "$np rank(s): 400 MPIX_Allreduce_enqueue on a cudaStream_t's communicator and its duplicate, random sizes, types, ops and bindings, every result exact and seen by har; the MPI's own elsewhere; bad input as the MPI" \
        env MPIR_CVAR_CH4_RESERVE_VCIS=2 $mpi $np "$prog" --calls 400 --seed $seed
done
done_testing
