#!/bin/sh
# MPI_Iallreduce and the persistent all-reduce on host buffers: the same
# results without har, under LD_PRELOAD and relinked (every call reaching
# har's wrapper, none staged), and through the staging path with the test
# build's HAR_TEST_STAGE=1 (every call staged, its results copied back by
# whichever completion call completes it; har's table empty and its pool
# within bounds at the end). Cases (tests/mpi/requests.c): several in
# flight beside point-to-point requests, completed by each completion call
# in a random order; rank 0's MPI_Iallreduce before its MPI_Send, rank 1's
# after its MPI_Recv; two communicators posted in opposite orders by
# half the ranks, a copy from the device between; persistent requests
# started, freed, made again; threads (and blocking calls from them). The same cases with har serving the calls itself (the test
# build's engine). Bad arguments get the MPI's own errors on either path.
. "$top_srcdir/tests/lib.sh"
plain="$bin/mpi/requests_plain"
linked="$bin/mpi/requests"
lib="$top_builddir/.libs/libhar.so"
seed=$(test_seed)
echo "# seed $seed"

# run_case DESCRIPTION COMMAND...: like check, but exit 77 is a skip.
run_case() {
    desc="$1"; shift
    runs "$desc" || return
    "$@" > "$tmp/out" 2>&1
    rc=$?
    if [ $rc = 77 ] || grep -q "^requests: .*skipped" "$tmp/out"; then
        tap_skip "$desc" "$(grep -m1 skipped "$tmp/out" | sed 's/^requests: //')"
        return
    fi
    [ $rc = 0 ] || rerun_line "$@"
    tap_report $rc "$desc" "$tmp/out"
}

"${MPICC:-mpicc}" -o "$tmp/relinked" "$top_srcdir/tests/mpi/requests.c" -I"$top_builddir" -L"$top_builddir/.libs" \
    -lhar -Wl,-rpath,"$top_builddir/.libs" -ldl -lpthread > "$tmp/cc" 2>&1
tap_result $? "requests.c relinks with -lhar" "$tmp/cc"

for case in inflight deadlock crossed persistent threads; do
    run_case "$case: without har" $mpi 3 "$plain" $case --seed $seed
    run_case "$case: LD_PRELOAD=libhar.so, every call through har's wrapper, none staged" \
        env LD_PRELOAD="$lib" $mpi 3 "$plain" $case --seed $seed --expect untouched
    run_case "$case: relinked, every call through har's wrapper, none staged" \
        $mpi 3 "$tmp/relinked" $case --seed $seed --expect untouched
    run_case "$case: HAR_TEST_STAGE=1, every call staged, results right" \
        env HAR_TEST_STAGE=1 $mpi 3 "$linked" $case --seed $seed --expect staged
done

# har's own non-blocking calls, where no GPU is: the test build's engine
# (HAR_ALGO=fake) starts MPI_Iallreduce and the starts of persistent
# all-reduces on a communicator a blocking call set up, and its requests
# (generalized requests har completes) mix with the MPI's in every
# completion call; 3 of the 5 calls a round are its own, so more than two
# are in flight on one communicator; a persistent request it serves cannot
# be started again or freed while it runs.
for case in inflight deadlock crossed persistent threads; do
    run_case "$case: HAR_ALGO=fake after a blocking call: har serves every MPI_Iallreduce and persistent start of a predefined type itself" \
        env HAR_ALGO=fake $mpi 3 "$linked" $case --seed $seed --expect har:fake
done
check_fails "--expect har:fake fails where the MPI served the calls" "expected har:fake" \
    $mpi 2 "$linked" inflight --rounds 2 --seed $seed --expect har:fake

# Across nodes (pretend nodes of 2: rails with 4 ranks, nodes of unequal
# size with 3) har runs its blocking path for MPI_Iallreduce and each
# persistent start, moved on by the completion calls: every one of a
# predefined type counted as progressed (when it ended), on the host
# segment, beside point-to-point requests, two communicators posted in
# opposite orders, rank 0's call before its MPI_Send and rank 1's after its
# MPI_Recv.
for np in 4 3; do
    for case in inflight deadlock crossed persistent; do
        run_case "$case across nodes ($np ranks, nodes of 2): every started call on har's blocking path, moved on by the completion calls" \
            env HAR_NODE_SIZE=2 $mpi $np "$linked" $case --seed $seed --expect har:host_segment --across
    done
done
check_fails "--across fails where the started calls were not har's across nodes" "expected every started call" \
    env HAR_ALGO=fake $mpi 2 "$linked" inflight --rounds 2 --seed $seed --expect har:fake --across
# One node where every rank has CUDA before MPI_Init (the test build's
# HAR_TEST_CUDA_AT from call 0 stands for a current context): the world is
# set up inside MPI_Init, and with no blocking call at all its started
# calls run har's blocking path in a fiber, whose arrival would set the
# node up for device buffers (host buffers here: nothing to set up), on
# the host segment. Where one rank has none, the world waits for a
# blocking call as any communicator does, and the MPI serves them.
for case in inflight deadlock persistent; do
    run_case "$case on one node with CUDA everywhere, no blocking call: the world set up inside MPI_Init, every started call on har's blocking path in a fiber" \
        env HAR_TEST_CUDA_AT='*:0' $mpi 3 "$linked" $case --seed $seed --expect har:host_segment --setup-none --progressed all
done
check_fails "... and where one rank has no CUDA the MPI serves them" "expected har:host_segment" \
    env HAR_TEST_CUDA_AT='1:0' $mpi 3 "$linked" inflight --rounds 2 --seed $seed --expect har:host_segment --setup-none
# Under MPI_THREAD_MULTIPLE a thread of har's moves them (HAR_PROGRESS_THREAD):
# the same cases, 4 threads each posting on its own communicator beside
# their blocking calls, and rank 0 computing 4 s with no MPI call while its
# peers' waits end (HAR_PROGRESS_THREAD=0: the MPI serves them, and the
# peers wait for rank 0; an MPI with a progress thread of its own, such as
# MPICH_ASYNC_PROGRESS=1, would pass there too).
for case in inflight deadlock crossed persistent threads unattended; do
    run_case "$case across nodes under MPI_THREAD_MULTIPLE (4 ranks, nodes of 2): every started call on har's blocking path, moved by its thread" \
        env HAR_NODE_SIZE=2 $mpi 4 "$linked" $case --seed $seed --expect har:host_segment --across --thread-multiple
done
check_fails "unattended: without the thread (HAR_PROGRESS_THREAD=0) the peers wait for rank 0's compute" "nothing moved rank 0's part" \
    env HAR_PROGRESS_THREAD=0 HAR_NODE_SIZE=2 $mpi 4 "$linked" unattended --seed $seed --thread-multiple
# Stress across nodes: batches of up to 8 in flight on two communicators,
# random sizes to 1.2 MB, random delays and completion calls, every
# element checked (tests/mpi/nbstress.c).
check "stress across 2 nodes of 2: 2000 MPI_Iallreduce, batches of up to 8 on two communicators, random delays and completion calls, every one progressed, every result exact" \
    env HAR_NODE_SIZE=2 $mpi 4 "$bin/mpi/nbstress" --calls 2000 --seed $seed --expect progressed
check "stress across nodes of 2+1 (leader): 1000 MPI_Iallreduce, every one progressed, every result exact" \
    env HAR_NODE_SIZE=2 $mpi 3 "$bin/mpi/nbstress" --calls 1000 --seed $seed --expect progressed
check "stress across 2 nodes of 2, mixed with blocking calls har serves, made by even ranks before completing each batch and by odd ranks after, and the MPI's (a user op) after: 500 calls" \
    env HAR_NODE_SIZE=2 $mpi 4 "$bin/mpi/nbstress" --calls 500 --seed $seed --expect progressed --mixed
check "stress across 2 nodes of 2 under HAR_CHECK=1 (not compared in the started calls, the blocking ones compared): 300 calls" \
    env HAR_CHECK=1 HAR_NODE_SIZE=2 $mpi 4 "$bin/mpi/nbstress" --calls 300 --seed $seed --expect progressed --mixed
check "stress across 2 nodes of 2 under MPI_THREAD_MULTIPLE (har's thread moves the started calls; a second thread makes blocking calls on a communicator of its own meanwhile): 2000 calls" \
    env HAR_NODE_SIZE=2 $mpi 4 "$bin/mpi/nbstress" --calls 2000 --seed $seed --expect progressed --thread-multiple --mixed
# MPI_Comm_free (or MPI_Comm_disconnect) with a started call running across nodes: har's wrapper
# ends the call before the MPI's free, never inside the MPI's attribute
# callback, where it would call the MPI from within the MPI (har says so
# under HAR_VERBOSE=2 when it must: PMPI_Comm_free bypassing the wrapper).
freed_outside() {  # freed_outside NBSTRESS-ARGS...
    env HAR_VERBOSE=2 HAR_NODE_SIZE=2 $mpi 4 "$bin/mpi/nbstress" "$@" > "$tmp/freed" 2>&1
    rc=$?
    cat "$tmp/freed"
    [ $rc = 0 ] && ! grep -q "they end inside the MPI's free" "$tmp/freed"
}
for threading in "" --thread-multiple; do
    check "MPI_Comm_free with started calls running across 2 nodes of 2${threading:+ under MPI_THREAD_MULTIPLE}: ended before the MPI's free, not inside its attribute callback, every result exact" \
        freed_outside --calls 20 --seed $seed --expect progressed $threading
    check_fails "... and with PMPI_Comm_free (har's wrapper bypassed)${threading:+ under MPI_THREAD_MULTIPLE} they end inside the MPI's free, which the check above sees" "they end inside the MPI's free" \
        freed_outside --calls 20 --seed $seed --expect progressed $threading --pmpi-free
done
check "MPI_Comm_disconnect with started calls running across 2 nodes of 2: ended before the MPI's disconnect, not inside its attribute callback, every result exact" \
    freed_outside --calls 20 --seed $seed --expect progressed --disconnect
check_fails "... and with PMPI_Comm_disconnect (har's wrapper bypassed) they end inside the MPI's free, which the check above sees" "they end inside the MPI's free" \
    freed_outside --calls 20 --seed $seed --expect progressed --disconnect --pmpi-free
check_fails "the stress catches one damaged element of a result (HAR_TEST_CORRUPT)" "element 1:" \
    env HAR_TEST_CORRUPT=1:1 HAR_NODE_SIZE=2 $mpi 4 "$bin/mpi/nbstress" --calls 50 --seed $seed --expect progressed

# The counters are in the HAR_VERBOSE=1 line at MPI_Finalize.
env LD_PRELOAD="$lib" HAR_VERBOSE=1 $mpi 2 "$plain" inflight --rounds 4 --seed $seed > "$tmp/out" 2>&1
grep -q "calls per path:.* iallreduce=20" "$tmp/out"
tap_result $? "HAR_VERBOSE=1 prints iallreduce=20 for 4 rounds of 5" "$tmp/out"

# The checks can fail: a flipped byte in every copy back, counters that
# do not show staging.
check_fails "HAR_TEST_STAGE=2 (every result copied back with a byte flipped) is caught" "FAIL rank" \
    env HAR_TEST_STAGE=2 $mpi 2 "$linked" inflight --rounds 9 --seed $seed
check_fails "--expect staged fails where nothing was staged" "expected staged" \
    $mpi 2 "$linked" inflight --rounds 2 --seed $seed --expect staged

# Bad arguments: the MPI's own answer, with har and through its staging.
if ! mpi_checks_arguments; then
    tap_skip "bad arguments (preload): the same error classes as the MPI's own" "$no_argument_checks"
    tap_skip "bad arguments (staged): the same error classes as the MPI's own" "$no_argument_checks"
    done_testing
    exit 0
fi
$mpi 2 "$plain" badargs > "$tmp/plain" 2>&1
grep '^requests: rank .*, class' "$tmp/plain" | sort > "$tmp/a"
for how in preload staged; do
    if [ $how = preload ]; then env LD_PRELOAD="$lib" $mpi 2 "$plain" badargs > "$tmp/har" 2>&1
    else env HAR_TEST_STAGE=1 $mpi 2 "$linked" badargs > "$tmp/har" 2>&1; fi
    grep '^requests: rank .*, class' "$tmp/har" | sort > "$tmp/b"
    [ -s "$tmp/a" ] && cmp -s "$tmp/a" "$tmp/b"
    tap_result $? "bad arguments ($how): the same error classes as the MPI's own ($(grep -c error "$tmp/a") errors)" "$tmp/har"
done
done_testing
