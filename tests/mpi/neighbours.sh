#!/bin/sh
# Hostile neighbours on the node (tests/mpi/intruder): another user, and
# another job of the same user, try to get the node segment of a running
# job while the job checks every result (check_allreduce). The segment's
# socket must refuse them (SO_PEERCRED, then the job's token), the named
# fallback's file must be the user's alone, and every result must stay
# right. HAR_TEST_STALL holds each set-up's window open for 1.5 s, so that
# the intruder meets every socket; it must have tried at least one, or the
# check proves nothing.
. "$top_srcdir/tests/lib.sh"
# The intruder runs as nobody too: a copy in a folder anyone may enter.
pub=$(mktemp -d)
trap 'rm -rf "$tmp" "$pub"' EXIT
chmod 755 "$pub"
cp "$bin/mpi/intruder" "$pub/intruder" && chmod 755 "$pub/intruder"
nobody=""
if [ "$(id -u)" = 0 ] && id nobody > /dev/null 2>&1 && command -v setpriv > /dev/null; then
    nobody="setpriv --reuid=nobody --regid=$(id -gn nobody) --clear-groups"
fi

# attack AS NP: the intruder (as AS: "nobody" or "self") beside a checked
# job of NP ranks; the job's and the intruder's lines go to $tmp/out.
attack() {
    as="$1" np="$2"; shift 2
    rm -f "$pub/stop"
    runner=""
    [ "$as" = nobody ] && runner="$nobody"
    $runner "$pub/intruder" 120 "$pub/stop" > "$pub/intruder.out" 2>&1 &
    pid=$!
    sleep 0.3
    env "$@" $mpi "$np" "$bin/mpi/check_allreduce" --comms 3 --sample 20 > "$tmp/out" 2>&1
    rc=$?
    touch "$pub/stop"
    wait $pid
    cat "$pub/intruder.out" >> "$tmp/out"
    return $rc
}

# refused: the job passed, and the intruder tried sockets (or saw named
# segments) and got none of them.
refused() {
    grep -q "case runs over all ranks, 0 failed" "$tmp/out" &&
        grep -Eq "^intruder: tried [1-9][0-9]* sockets, [0-9]+ refused, 0 segments obtained; saw [0-9]+ named segments, opened 0$" "$tmp/out"
}
named_refused() {
    grep -q "case runs over all ranks, 0 failed" "$tmp/out" &&
        grep -Eq "^intruder: tried [0-9]+ sockets, [0-9]+ refused, 0 segments obtained; saw [1-9][0-9]* named segments, opened 0$" "$tmp/out"
}

for shape in "3 HAR_NODE_SIZE=0" "4 HAR_NODE_SIZE=2"; do
    np=${shape%% *} env=${shape#* }
    if [ -n "$nobody" ]; then
        attack nobody $np $env HAR_TEST_STALL=1:segment-shared:1.5
        rc=$?
        [ $rc = 0 ] && refused && grep -q "refused a connection .* from another user" "$tmp/out"
        tap_result $? "another user connects to the segment's socket ($np ranks, $env): refused, every result right" "$tmp/out"
    else
        tap_skip "another user connects to the segment's socket ($np ranks, $env)" "needs root and setpriv to act as nobody"
    fi
    attack self $np $env HAR_TEST_STALL=1:segment-shared:1.5
    rc=$?
    [ $rc = 0 ] && refused && grep -q "did not present the job's token" "$tmp/out"
    tap_result $? "another job of the same user connects to the segment's socket ($np ranks, $env): refused, every result right" "$tmp/out"
done

# The named fallback (as when ranks sit in different network namespaces):
# the file is mode 0600, so another user cannot open it. (A process of the
# same user can, as it can read the job's memory through /proc: docs/SECURITY.md.)
if [ -n "$nobody" ]; then
    attack nobody 3 HAR_TEST_NO_SOCKET=1 HAR_TEST_STALL=0:segment-named:1.5
    rc=$?
    [ $rc = 0 ] && named_refused
    tap_result $? "another user opens the named segment in /dev/shm: refused, every result right" "$tmp/out"
else
    tap_skip "another user opens the named segment in /dev/shm" "needs root and setpriv to act as nobody"
fi
done_testing
