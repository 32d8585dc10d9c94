#!/bin/sh
# The README's variable table is the one generated from har's table, and an
# unknown HAR_* name is warned about with the closest known one.
. "$top_srcdir/tests/lib.sh"
info="$top_builddir/har-info"
"$info" --variables > "$tmp/table"
sed -n '/<!-- variables:begin -->/,/<!-- variables:end -->/p' "$top_srcdir/README.md" | sed '1d;$d' > "$tmp/readme"
cmp -s "$tmp/table" "$tmp/readme"
tap_result $? "the README's variable table matches har-info --variables (scripts/update-variables regenerates it)"
env HAR_SLOT_BYTE=1 HAR_VERBOSE=1 $mpi 1 "$info" > "$tmp/out" 2>&1
grep -q "unknown variable HAR_SLOT_BYTE ignored (did you mean HAR_SLOT_BYTES?)" "$tmp/out"
tap_result $? "unknown HAR_SLOT_BYTE: warning names HAR_SLOT_BYTES" "$tmp/out"
# A long unknown name: the suggestion is for that name, or none, never another's.
long=HAR_THIS_IS_A_VERY_LONG_NAME_THAT_NOBODY_WOULD_TYPE_BY_ACCIDENT_AT_ALL
env HAR_SLOT_BYTE=1 $long=1 HAR_REDUCE_THREADS_PER_RANK_OF_THE_NODE_SEGMENT_OF_THIS_JOB_X=1 \
    $mpi 1 "$info" > "$tmp/out" 2>&1
grep -q "unknown variable $long ignored (har-info --variables lists the known ones)" "$tmp/out" &&
    grep -q "unknown variable HAR_SLOT_BYTE ignored (did you mean HAR_SLOT_BYTES?)" "$tmp/out" &&
    grep -q "unknown variable HAR_REDUCE_THREADS_PER_RANK_OF_THE_NODE_SEGMENT_OF_THIS_JOB_X ignored (" "$tmp/out" &&
    ! grep -q "did you mean ?" "$tmp/out"
tap_result $? "unknown names of 63 characters and more: each its own suggestion or none, never an empty one" "$tmp/out"
# A value refused on one rank only is said by that rank, naming it.
check "HAR_VERBOSE=loud (a per-rank setting) on rank 2 only: rank 2 says it refused it" \
    sh -c '"$@" > "$0" 2>&1; rc=$?; cat "$0"; [ $rc = 0 ] &&
           [ "$(grep -c "warning: HAR_VERBOSE=loud refused" "$0")" = 1 ] && grep -q "^har\[2 .*HAR_VERBOSE=loud refused" "$0"' \
    "$tmp/o" $mpi 3 sh -c 'case "$OMPI_COMM_WORLD_RANK$PMI_RANK" in 2) export HAR_VERBOSE=loud ;; esac; exec "$@"' \
    sh "$bin/mpi/check_allreduce" --counts 7 --types int --ops sum --comms 1 --any-path
env HAR_SLOT_BYTES=64K $mpi 1 "$info" > "$tmp/out" 2>&1
grep -q "HAR_SLOT_BYTES *= 64K *(environment)" "$tmp/out"
tap_result $? "har-info shows a variable's value and its source" "$tmp/out"
# A renamed setting's old name still serves, with a warning, and is not
# taken for an unknown one.
env HAR_RING_SEGMENT=16K $mpi 1 "$info" > "$tmp/out" 2>&1
grep -q "warning: HAR_RING_SEGMENT is now called HAR_RING_MESSAGE; its value is used" "$tmp/out" &&
    grep -q "HAR_RING_MESSAGE *= 16K *(environment)" "$tmp/out" && ! grep -q "unknown variable HAR_RING_SEGMENT" "$tmp/out"
tap_result $? "HAR_RING_SEGMENT, the old name of HAR_RING_MESSAGE: its value serves, with a warning" "$tmp/out"
env HAR_RING_SEGMENT=16K HAR_RING_MESSAGE=4K $mpi 1 "$info" > "$tmp/out" 2>&1
grep -q "HAR_RING_MESSAGE *= 4K *(environment)" "$tmp/out" && ! grep -q "HAR_RING_SEGMENT is now called" "$tmp/out" &&
    grep -q "warning: HAR_RING_SEGMENT ignored: HAR_RING_MESSAGE, its new name, is set" "$tmp/out" &&
    ! grep -q "unknown variable HAR_RING_SEGMENT" "$tmp/out"
tap_result $? "HAR_RING_MESSAGE set: its value serves, HAR_RING_SEGMENT is ignored, with a warning" "$tmp/out"
env HAR_RING_SEGMENT=lots $mpi 1 "$info" > "$tmp/out" 2>&1
grep -q "warning: HAR_RING_SEGMENT=lots refused" "$tmp/out" && ! grep -q "its value is used" "$tmp/out"
tap_result $? "HAR_RING_SEGMENT=lots: refused under its old name, not said to be used" "$tmp/out"
# Bad values are refused, each with one warning naming it, and the default
# serves; har-info shows the default.
for bad in "NODE_SIZE=-3" "NODE_SIZE=99999999999999999999" "REDUCE_THREADS=-5" "VERBOSE=-9" "INTER=bogus" \
    "MAX_COMMS=-1" "SLOT_BYTES=12Q" "SLOT_BYTES=auto" "TIMEOUT=soon" "ALGO=ipc+fast" "REQUIRE_PATH=nowhere" "MPI_CUDA_P2P=yes"; do
    name=HAR_${bad%%=*} value=${bad#*=}
    env "$name=$value" $mpi 1 "$info" > "$tmp/out" 2>&1
    [ "$(grep -c "warning: $name=.* refused" "$tmp/out")" = 1 ] && grep -q "^  $name *= .*(default)" "$tmp/out"
    tap_result $? "$name=$value: refused with one warning, the default serves" "$tmp/out"
done
# A warning that recurs is said once, and counted at MPI_Finalize.
env HAR_MAX_COMMS=1 $mpi 4 "$bin/mpi/check_allreduce" --counts 7,8 --types int,float --ops sum,max --any-path > "$tmp/out" 2>&1
[ "$(grep -c 'warning: HAR_MAX_COMMS=1 communicators' "$tmp/out")" -le 4 ] && grep -q "said [0-9]* times in all: HAR_MAX_COMMS=1" "$tmp/out"
tap_result $? "HAR_MAX_COMMS=1 with 4 communicators: the warning once per process, then its count" "$tmp/out"
# har-info --clean removes what a dead process left (a named segment nobody locks).
stale=/dev/shm/har-test-stale-$$
head -c 4096 /dev/zero > "$stale"
"$info" --clean > "$tmp/out" 2>&1
[ ! -e "$stale" ] && grep -q "removed /dev/shm/har-test-stale-$$" "$tmp/out"
tap_result $? "har-info --clean removes a stale segment and says so" "$tmp/out"
rm -f "$stale"
# What the MPI can do with device memory: har-info says what the MPI
# answered and each conclusion with its reason; a setting wins, named.
env HAR_MPI_CUDA_REDUCE=1 $mpi 1 "$info" > "$tmp/out" 2>&1
grep -q "^MPI and device memory (.*):$" "$tmp/out" && grep -q "^  it says: MPIX_Query_cuda_support " "$tmp/out" &&
    grep -Eq "^  point-to-point on device memory: (yes|no) \(.+\)$" "$tmp/out" &&
    grep -q "^  MPI_Allreduce and the other blocking collectives: yes (HAR_MPI_CUDA_REDUCE=1, your setting)$" "$tmp/out" &&
    grep -Eq "^  non-blocking and persistent collectives: (yes|no, har stages them) \(.+\)$" "$tmp/out"
tap_result $? "har-info: what the MPI says of device memory, each answer with its reason, HAR_MPI_CUDA_REDUCE=1 named" "$tmp/out"
# And what that makes of the step between nodes: each transport takes
# device memory where the MPI calls it makes take it (NCCL, a transport
# where har is built with CUDA, always does).
nccl_too="(; inter_nccl as they are)?"
env HAR_MPI_CUDA_P2P=0 HAR_MPI_CUDA_NONBLOCKING=1 $mpi 1 "$info" > "$tmp/out" 2>&1
grep -Eq "^  between nodes, device shards reach ring through pinned host memory; doubling through pinned host memory; inter_mpi as they are$nccl_too$" "$tmp/out"
tap_result $? "har-info: HAR_MPI_CUDA_NONBLOCKING=1 hands device shards to the MPI's all-reduce as they are, the ring copies them" "$tmp/out"
env HAR_MPI_CUDA_P2P=1 HAR_MPI_CUDA_NONBLOCKING=0 $mpi 1 "$info" > "$tmp/out" 2>&1
grep -Eq "^  between nodes, device shards reach ring as they are; doubling as they are; inter_mpi through pinned host memory$nccl_too$" "$tmp/out"
tap_result $? "har-info: HAR_MPI_CUDA_P2P=1 hands them to the ring and doubling as they are, not to the MPI's all-reduce" "$tmp/out"
done_testing
