#!/bin/sh
# A short validated sweep of har-bench on host buffers: every har call served
# by har (HAR_REQUIRE_PATH), every result of both candidates checked, and a
# CSV with a row per size and candidate; in place, then out of place; then
# --nonblocking (its columns of host work, time with it and overlap filled
# for the non-blocking candidates only); then --har-only (no MPI row).
. "$top_srcdir/tests/lib.sh"
env HAR_REQUIRE_PATH=host_segment $mpi 2 "$top_builddir/har-bench" --min 4 --max 1M --iters 5 --warmup 1 \
    --check --csv "$tmp/bench.csv" > "$tmp/out" 2>&1
rc=$?
rows=$(grep -c ',yes,yes,,,,,,,,,$' "$tmp/bench.csv" 2>/dev/null)  # checked, in place, blocking (no --nonblocking or --enqueue columns)
# 4 B .. 1 MiB: 19 sizes, two candidates each, all checked.
[ $rc = 0 ] && [ "$rows" = 38 ] && ! grep -q FAILED "$tmp/out"
tap_result $? "har-bench, 2 ranks, 4 B to 1 MiB: 38 checked rows, every har call on the host segment" "$tmp/out"

env HAR_REQUIRE_PATH=host_segment $mpi 3 "$top_builddir/har-bench" --min 4 --max 1M --iters 5 --warmup 1 \
    --out-of-place --check --csv "$tmp/separate.csv" > "$tmp/out" 2>&1
rc=$?
rows=$(grep -c ',yes,no,,,,,,,,,$' "$tmp/separate.csv" 2>/dev/null)  # checked, out of place, blocking
[ $rc = 0 ] && [ "$rows" = 38 ] && ! grep -q FAILED "$tmp/out" && grep -q 'a send buffer each' "$tmp/out"
tap_result $? "har-bench --out-of-place, 3 ranks, 4 B to 1 MiB: 38 checked rows, every har call on the host segment" \
    "$tmp/out"

env HAR_REQUIRE_PATH=host_segment $mpi 2 "$top_builddir/har-bench" --nonblocking --min 4 --max 64K --iters 5 \
    --warmup 1 --check --csv "$tmp/nb.csv" > "$tmp/out" 2>&1
rc=$?
# 4 B .. 64 KiB: 15 sizes; har and mpi post and wait, each with its overlap
# run (host work = its pure time), har_blocking as before.
nb=$(grep -Ec '^[0-9]+,(har|mpi),.*,yes,yes,[0-9.]+,[0-9.]+,[0-9.]+,,,,,,$' "$tmp/nb.csv" 2>/dev/null)
blocking=$(grep -Ec ',har_blocking,.*,host_segment\+(one|two)_shot,yes,yes,,,,,,,,,$' "$tmp/nb.csv" 2>/dev/null)
[ $rc = 0 ] && [ "$nb" = 30 ] && [ "$blocking" = 15 ] && ! grep -q FAILED "$tmp/out" && grep -q -- '--nonblocking' "$tmp/out"
tap_result $? "har-bench --nonblocking, 2 ranks, 4 B to 64 KiB: 45 checked rows, overlap measured for har and mpi" \
    "$tmp/out"
env HAR_REQUIRE_PATH=host_segment $mpi 2 "$top_builddir/har-bench" --har-only --min 4 --max 1M --iters 5 --warmup 1 \
    --check --csv "$tmp/alone.csv" > "$tmp/out" 2>&1
rc=$?
rows=$(grep -c '^[0-9]*,har,.*,yes,yes,,,,,,,,,$' "$tmp/alone.csv" 2>/dev/null)
others=$(grep -vc '^bytes\|^[0-9]*,har,' "$tmp/alone.csv" 2>/dev/null)
[ $rc = 0 ] && [ "$rows" = 19 ] && [ "$others" = 0 ] && ! grep -q FAILED "$tmp/out" && grep -q -- '--har-only' "$tmp/out"
tap_result $? "har-bench --har-only, 2 ranks, 4 B to 1 MiB: 19 checked rows of har alone, no MPI timed" "$tmp/out"
done_testing
