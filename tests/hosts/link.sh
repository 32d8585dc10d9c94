#!/bin/sh
# The links between hosts made of namespaces (scripts/hosts-run): the MPI's
# traffic between hosts really crosses each host's veth (its counters move
# by at least what a ring all-reduce must send, for har and for the MPI's
# own all-reduce; MPICH's UCX would take shared memory if it took two hosts
# for one machine), --rate shapes the link, and what the script says about
# this machine and about a caller that is not root.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/hosts/hosts.sh"
prog="$bin/hosts/link_bytes"

# bytes LOG SIDE LOW HIGH: every host's tx/ring ratio for SIDE is in [LOW, HIGH].
bytes() {
    sed -n "s/^link_bytes: $2 host .* tx\\/ring \\([0-9.]*\\)$/\\1/p" "$1" |
        awk -v lo="$3" -v hi="$4" '{ n++; if ($1 < lo || $1 > hi) bad++ } END { exit !(n > 0 && !bad) }'
}
counted() {  # counted N R: N hosts of R ranks, 4 MiB x 5 calls
    env HAR_INTER=ring HAR_REQUIRE_PATH=ring $hosts "$1" "$2" -- "$prog" --bytes 4194304 --calls 5 > "$tmp/log" 2>&1
    rc=$?
    cat "$tmp/log"
    # har's ring sends 2(N-1)/N of the node's data and a little more
    # (headers, TCP/IP headers, acknowledgements of what comes in); the MPI
    # chooses its own algorithm but cannot send much less than that.
    [ $rc = 0 ] && grep -q "results right" "$tmp/log" &&
        [ "$(grep -c "^link_bytes: har host" "$tmp/log")" = "$1" ] &&
        bytes "$tmp/log" har 1.0 1.1 && bytes "$tmp/log" mpi 0.5 3
}
hcheck "2 hosts of 1: each host's veth carries har's ring (1.0-1.1 of 2(N-1)/N of the data) and the MPI's" counted 2 1
hcheck "4 hosts of 1: the same" counted 4 1
hcheck "2 hosts of 2: the node's data crosses once, whatever its ranks" counted 2 2
hcheck_fails "the counters check can fail: a ring bound of 1.5-2 is refused" "not in" \
    sh -c '"$1" 2 1 -- "$2" --bytes 4194304 --calls 5 > "$3/b" 2>&1; cat "$3/b"
        sed -n "s/^link_bytes: har host .* tx\/ring \([0-9.]*\)$/\1/p" "$3/b" |
        awk "{ if (\$1 < 1.5 || \$1 > 2) { print \"ratio \" \$1 \" not in [1.5, 2]\"; bad = 1 } } END { exit bad }"' \
    sh "$hosts" "$prog" "$tmp"

# --rate: 5 calls of 4 MiB on 2 hosts send 20 MiB from each host, which
# takes 1.68 s at 100 Mbit/s; unshaped, a fraction of that.
shaped() {
    $hosts --rate 100mbit 2 1 -- "$prog" --bytes 4194304 --calls 5 > "$tmp/log" 2>&1
    rc=$?
    cat "$tmp/log"
    [ $rc = 0 ] && sed -n 's/^link_bytes: har host .* seconds \([0-9.]*\) .*/\1/p' "$tmp/log" |
        awk '{ n++; if ($1 < 1.5) bad++ } END { exit !(n == 2 && !bad) }'
}
hcheck "--rate 100mbit: 20 MiB per host take at least 1.5 s (1.68 s at the rate)" shaped

# What this machine can make, and what the script needs.
check "hosts-run --probe says what this machine can make" sh -c '"$1" --probe > "$2/p" 2>&1; s=$?; cat "$2/p"
    [ $s = 0 ] && grep -q "^namespaces (network, UTS, mount, IPC, PID): " "$2/p" && grep -q "^tbf (--rate): " "$2/p" &&
    grep -q "^netem (--delay): " "$2/p"' sh "$hosts_run" "$tmp"
nobody=$(id -u nobody 2> /dev/null)
as_nobody() { setpriv --reuid="$nobody" --regid="$nobody" --clear-groups "$@"; }
if [ -z "$nobody" ] || ! command -v setpriv > /dev/null || [ "$(id -u)" != 0 ]; then
    tap_skip "not root: hosts-run says it needs root" "no user nobody, no setpriv, or not root here"
elif ! as_nobody test -x "$hosts_run"; then  # a checkout inside a private folder (mktemp -d)
    tap_skip "not root: hosts-run says it needs root" "user nobody cannot reach $hosts_run"
else
    check_fails "not root: hosts-run says it needs root" "needs root" as_nobody "$hosts_run" 2 1 -- true
fi
if [ -n "$hosts_why" ] || grep -q "^netem (--delay): yes" "$tmp/probe"; then
    tap_skip "--delay without netem is refused, saying so" "${hosts_why:-this kernel has netem}"
else
    check_fails "--delay without netem is refused, saying so" "cannot delay links (--delay): netem no" \
        "$hosts_run" --delay 1 2 1 -- true
fi
done_testing
