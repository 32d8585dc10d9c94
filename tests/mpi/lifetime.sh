#!/bin/sh
# Communicator lifetime: 1000 create/use/free cycles leak no file, memory or
# /dev/shm entry; threads set up and use communicators at once.
. "$top_srcdir/tests/lib.sh"
lib="$top_builddir/.libs/libhar.so"
env LD_PRELOAD="$lib" HAR_REQUIRE_PATH=host_segment $mpi 2 "$bin/mpi/stress_comms" 1000 > "$tmp/out" 2>&1
tap_result $? "1000 communicators: no growth in fds, memory, /dev/shm (2 ranks)" "$tmp/out"
env LD_PRELOAD="$lib" HAR_NODE_SIZE=1 HAR_REQUIRE_PATH=rails $mpi 2 "$bin/mpi/stress_comms" 300 > "$tmp/out" 2>&1
tap_result $? "300 communicators over two pretend nodes (rails)" "$tmp/out"
# valgrind: the MPI's own plugins report plenty (and are unloaded before the
# end, so their frames show as ???); har's code must appear in no report of
# invalid access, uninitialised use or definite leak.
if command -v valgrind > /dev/null; then
    env LD_PRELOAD="$lib" $mpi 2 valgrind --leak-check=full --show-leak-kinds=definite \
        --log-file="$tmp/vg.%p" "$bin/mpi/stress_comms" 20 > "$tmp/out" 2>&1
    rc=$?
    # Records are separated by "==pid== " lines; keep those that name har.
    cat "$tmp"/vg.* | awk '/^==[0-9]+== $/ { if (rec ~ /(libhar|har_|src\/[a-z_]+\.c)/ && rec ~ /(Invalid|uninitialised|definitely lost)/) print rec; rec = ""; next }
                           { rec = rec "\n" $0 }' > "$tmp/har-reports"
    cat "$tmp/har-reports" >> "$tmp/out"
    [ $rc = 0 ] && [ ! -s "$tmp/har-reports" ] && grep -q "definitely lost\|no leaks are possible\|ERROR SUMMARY" "$tmp"/vg.*
    tap_result $? "valgrind, 20 cycles: no invalid access, uninitialised use or definite leak in har's code" "$tmp/out"
else
    tap_skip "valgrind leak check" "valgrind not installed"
fi
"$bin/mpirun.sh" 2 "$bin/mpi/threads" > "$tmp/out" 2>&1
rc=$?
if [ $rc = 77 ]; then tap_skip "threads" "no MPI_THREAD_MULTIPLE"; else tap_result $rc "MPI_THREAD_MULTIPLE: 4 threads, own communicators, first use at once" "$tmp/out"; fi
done_testing
