#!/bin/sh
# An application built with plain mpicc, knowing nothing of har, gives the
# same output with har (LD_PRELOAD, relinked, har-run) as without, and har
# really served its calls (counters printed at MPI_Finalize).
. "$top_srcdir/tests/lib.sh"
app="$bin/mpi/plain_app"
lib="$top_builddir/.libs/libhar.so"
cc="${MPICC:-mpicc}"

# same_output WITHOUT WITH: the program's lines match, and har served calls.
same_output() {
    grep '^plain_app' "$1" | sort > "$tmp/a"; grep '^plain_app' "$2" | sort > "$tmp/b"
    [ -s "$tmp/a" ] && cmp -s "$tmp/a" "$tmp/b" && grep -q "host_segment=[1-9]" "$2"
}

$mpi 3 "$app" > "$tmp/plain" 2>&1
tap_result $? "plain_app runs without har" "$tmp/plain"

env HAR_VERBOSE=1 LD_PRELOAD="$lib" $mpi 3 "$app" > "$tmp/preload" 2>&1
same_output "$tmp/plain" "$tmp/preload"
tap_result $? "LD_PRELOAD=libhar.so: same output, calls served on the host segment" "$tmp/preload"

# Relinked: -lhar before the MPI library, nothing else changed.
"$cc" -o "$tmp/relinked" "$top_srcdir/tests/mpi/plain_app.c" -L"$top_builddir/.libs" -lhar \
    -Wl,-rpath,"$top_builddir/.libs" > "$tmp/cc" 2>&1
tap_result $? "plain_app relinks with -lhar" "$tmp/cc"
env HAR_VERBOSE=1 $mpi 3 "$tmp/relinked" > "$tmp/relinked.out" 2>&1
same_output "$tmp/plain" "$tmp/relinked.out"
tap_result $? "relinked: same output, calls served on the host segment" "$tmp/relinked.out"

# har-run: the launcher users call; it must carry LD_PRELOAD and HAR_* to ranks.
launcher=$(sed -n 's/^exec timeout -k 10 "[^"]*" "\([^"]*\)".*/\1/p' "$bin/mpirun.sh")
case "$MPI_FLAVOUR" in
openmpi) extra="--oversubscribe --bind-to none"; export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 ;;
*) extra="" ;;
esac
env HAR_LIBRARY="$lib" HAR_VERBOSE=1 HAR_REQUIRE_PATH=host_segment \
    timeout 120 "$top_builddir/scripts/har-run" "$launcher" $extra -np 2 "$app" > "$tmp/harrun" 2>&1
grep -q "host_segment=[1-9]" "$tmp/harrun" && grep -q '^plain_app: 2 ranks' "$tmp/harrun"
tap_result $? "har-run forwards LD_PRELOAD and HAR_* to the ranks" "$tmp/harrun"

# The training demo, unmodified, through har.
"$cc" -O2 -o "$tmp/train" "$top_srcdir/examples/train.c" -lm > "$tmp/cc" 2>&1 &&
    env LD_PRELOAD="$lib" HAR_VERBOSE=1 $mpi 4 "$tmp/train" --steps 30 > "$tmp/train.out" 2>&1 &&
    ! grep -q "CHECK FAILED" "$tmp/train.out" && grep -q "host_segment=[1-9]" "$tmp/train.out"
tap_result $? "examples/train.c (unmodified) trains through har, its checks pass" "$tmp/train.out"
# The overlap example: gradient buckets by MPI_Iallreduce during the
# backward pass and by MPI_Allreduce, through har's wrappers (host buffers:
# the MPI serves the non-blocking calls); its checks against a gathered sum.
"$cc" -O2 -o "$tmp/overlap" "$top_srcdir/examples/overlap.c" -lm > "$tmp/cc" 2>&1 &&
    env LD_PRELOAD="$lib" HAR_VERBOSE=1 $mpi 3 "$tmp/overlap" --steps 8 > "$tmp/overlap.out" 2>&1 &&
    [ "$(grep -c "CHECK ok" "$tmp/overlap.out")" = 6 ] && grep -q "non-blocking / blocking step time" "$tmp/overlap.out" &&
    grep -q "calls per path:.* iallreduce=56" "$tmp/overlap.out"
tap_result $? "examples/overlap.c trains through har both ways, its 6 checks pass, har saw its 56 MPI_Iallreduce" "$tmp/overlap.out"
done_testing
