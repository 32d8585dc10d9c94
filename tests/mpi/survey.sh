#!/bin/sh
# The device survey (src/cuda/survey.c) on recorded machines, without a GPU:
# the test build reads each description in tests/mpi/gpus/ (HAR_TEST_GPUS)
# in the driver's and NVML's place, and every rank checks what its node
# agreed (ranks sharing GPUs, ranks per GPU, peer reach, MPS, the machine
# class) against the values written here for that machine. Skipped where
# har was built without CUDA headers (there is no survey).
. "$top_srcdir/tests/lib.sh"
prog="$bin/mpi/survey"
gpus="$top_srcdir/tests/mpi/gpus"
"$prog" --probe > "$tmp/probe" 2>&1
case $? in
0) ;;
77) echo "1..0 # SKIP har built without CUDA headers"; exit 0 ;;
*) tap_result 1 "survey --probe" "$tmp/probe"; done_testing; exit 0 ;;
esac

# machine DESCRIPTION FILE NP EXPECTATIONS...: NP ranks survey the machine in FILE.
machine() {
    desc="$1" file="$2" np="$3"; shift 3
    check "$desc" env HAR_TEST_GPUS="$gpus/$file" $mpi "$np" "$prog" "$@"
}
machine "8 H200 with NVLink, one per rank: NVIDIA_H200/nvlink" h200x8-nvlink.txt 8 \
    --gpus 8 --shared 0 --same 1 --reach 1 --mps 0 --class NVIDIA_H200/nvlink
machine "the same machine, 4 ranks as 2 nodes of 2: each node its own 2 GPUs" h200x8-nvlink.txt 4 --nodes 2 \
    --gpus 2 --shared 0 --same 1 --reach 1 --mps 0 --class NVIDIA_H200/nvlink
machine "4 ranks share one H200 under MPS: NVIDIA_H200/mps" h200-mps-4.txt 4 \
    --gpus 1 --shared 1 --same 4 --reach 1 --mps 1 --class NVIDIA_H200/mps
machine "4 ranks share one H200 without MPS: NVIDIA_H200/shared" h200-shared-4.txt 4 \
    --gpus 1 --shared 1 --same 4 --reach 1 --mps 0 --class NVIDIA_H200/shared
machine "3 ranks on 2 H200 without MPS (2 on GPU 0): NVIDIA_H200/shared" h200x2-shared-3.txt 3 \
    --gpus 2 --shared 1 --same 2,1,2 --reach 1 --mps 0 --class NVIDIA_H200/shared
machine "2 L40S on PCIe without peer access: not reachable, NVIDIA_L40S/none" l40s-pcie-nop2p.txt 2 \
    --gpus 2 --shared 0 --same 1 --reach 0 --mps 0 --class NVIDIA_L40S/none
machine "2 L40S on PCIe with peer access: NVIDIA_L40S/pcie" l40s-pcie-p2p.txt 2 \
    --gpus 2 --shared 0 --same 1 --reach 1 --mps 0 --class NVIDIA_L40S/pcie
machine "an H200 and an H100: mixed" h200-h100-mixed.txt 2 \
    --gpus 2 --shared 0 --same 1 --reach 1 --mps 0 --class mixed
machine "each rank sees only its own H200 (ordinal 0 everywhere): 4 GPUs, not reachable, NVIDIA_H200/none" \
    h200x4-own-gpu.txt 4 --gpus 4 --shared 0 --same 1 --reach 0 --mps 0 --class NVIDIA_H200/none
machine "2 ranks number 2 H200 in opposite orders (ordinal 0 on both): GPUs told by UUID, NVIDIA_H200/nvlink" \
    h200x2-swapped.txt 2 --gpus 2 --shared 0 --same 1 --reach 1 --mps 0 --class NVIDIA_H200/nvlink
# The checks can fail: a wrong expectation, and a description the survey cannot read.
check_fails "a wrong expectation fails (the PCIe pair without peer access taken for reachable)" \
    "FAIL rank 0: reachable 0, expected 1" \
    env HAR_TEST_GPUS="$gpus/l40s-pcie-nop2p.txt" $mpi 2 "$prog" \
    --gpus 2 --shared 0 --same 1 --reach 1 --mps 0 --class NVIDIA_L40S/none
sed 's/^gpu 1 GPU-[0-9a-f]*/gpu 1 GPU-not-hex/' "$gpus/l40s-pcie-p2p.txt" > "$tmp/bad.txt"
check_fails "a malformed description is said, and the survey finds no GPU" "HAR_TEST_GPUS=.*: line 4: a UUID is 32 hex digits" \
    env HAR_TEST_GPUS="$tmp/bad.txt" $mpi 2 "$prog" \
    --gpus 2 --shared 0 --same 1 --reach 1 --mps 0 --class NVIDIA_L40S/pcie
done_testing
