#!/bin/sh
# Faults across hosts made of namespaces (scripts/hosts-run), 2 hosts of 2
# ranks (and of 1, where only the death watch across nodes can tell): a rank killed (the test build's HAR_TEST_KILL, and kill -9 from
# outside, in its host's PID namespace), a host's link cut (HAR_TIMEOUT: a
# cut link carries no news), a stopped rank (SIGSTOP, HAR_TIMEOUT). Every
# other rank must end its all-reduce in bounded time with har's message
# naming the rank, and nothing may be left in any host afterwards. Then
# hosts-run's own bounds: a program that never ends (--timeout), and
# hosts-run itself killed by SIGKILL.
#
# Open MPI 4's launcher keeps the survivors of a death alive with
# --enable-recovery; its job then does not end by itself once a rank has
# died and the others have finished, when the ranks run under daemons on
# other hosts (a plain MPI program does the same), so those cases end by
# hosts-run's --timeout, which is part of what they check. MPICH's Hydra,
# and Open MPI 5 (its TCP transport aborts on a lost peer unless the job
# runs with ULFM), end the whole job when a rank dies: there only the
# death, the job's end and the residue are checked.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/hosts/hosts.sh"
victim="$bin/mpi/victim"
calls=20000   # working calls last far longer than any case needs; failed ones take microseconds
# $run: hosts-run itself, not $hosts, which fails when daemons are left
# for hosts-run's --timeout to kill, as some cases here must.
run="$tmp/run"
printf '#!/bin/sh\nexec "%s" %s "$@"\n' "$hosts_run" "$hosts_args" > "$run"
chmod +x "$run"
recovery="" only=""
if [ "$launcher_kind" = orte ]; then
    recovery="--launcher-arg --enable-recovery"
else
    only=" (the MPI ends the job; the death, the end and the residue checked)"
fi
shm_before=$(shm_residue)

# No rank of the program, and no process at all after the teardown, may be
# left; nothing in the machine's own /dev/shm either.
residue_ok() {  # residue_ok LOG
    ! grep -q "left running: .*$(basename "$2")" "$1" && ! grep -q "left after teardown" "$1" &&
        grep -q "^hosts-run: .* exited with status" "$1" &&
        [ "$(shm_residue)" -le "$shm_before" ]
}

# A write to the dead rank's socket can cost the writer too, in Open MPI
# 4.1's TCP transport: SIGPIPE ends it (the MPI leaves the signal at its
# default; victim says so first), or after "writev failed" one PMPI_Testall
# never returns (its progress spins on the reset socket) and har never gets
# to look. lost_to_mpi LOG RANK: did either happen to that rank (the MPI's
# line may be cut by another rank's)?
lost_to_mpi() {
    grep -q "victim: rank $2: ended by SIGPIPE" "$1" ||
        grep -q "\[\[[0-9]*,[0-9]*\],$2\]\[[^]]*btl_tcp_frag.c" "$1"
}

# survivors LOG DEAD PATTERN [finalized]: every rank but DEAD failed its call
# within 5 s of the others (victim prints the time since its loop began) and
# said so after har's line matching PATTERN. Under Open MPI one rank that did
# not come back may have been lost to its transport (lost_to_mpi): the others
# may then name that one, the first death they learnt of, and need not come
# out of MPI_Finalize (the MPI's may wait for it). With "finalized", each
# survivor came out of MPI_Finalize. Lines are looked for anywhere: the
# MPI's lines on stderr can be cut by ours.
ranks="0 1 2 3"  # the job's ranks, for survivors
survivors() {
    log="$1" dead="$2" pattern="$3" ok=0 lost=""
    for r in $ranks; do
        [ "$r" != "$dead" ] && [ "$launcher_kind" = orte ] && ! grep -q "victim: rank $r: failed at call" "$log" &&
            lost_to_mpi "$log" $r && lost="$lost $r" &&
            echo "rank $r: lost to the MPI's TCP transport after a write to the dead rank"
    done
    [ "$(echo $lost | wc -w)" -le 1 ] || { echo "more than one rank lost to the MPI:$lost"; ok=1; }
    [ -n "$lost" ] && pattern="\($pattern\|rank$lost (world rank$lost, host h[0-9]*) died\)"
    for r in $ranks; do
        [ "$r" = "$dead" ] || [ "$r" = "${lost# }" ] && continue
        grep -q "victim: rank $r: failed at call" "$log" && grep -q "har\[$r .*$pattern" "$log" ||
            { echo "rank $r: no failure, or no message from har"; ok=1; }
        [ "${4:-}" != finalized ] || [ -n "$lost" ] || grep -q "victim: rank $r: finalized" "$log" ||
            { echo "rank $r: no finalize"; ok=1; }
    done
    survivors_time "$log" || ok=1
    return $ok
}
survivors_time() {  # the survivors failed within 5 s of each other
    sed -n 's/^.*victim: rank [0-9]*: failed at call [0-9]* after \([0-9.]*\) s:.*/\1/p' "$1" |
        awk '{ if (NR == 1 || $1 < lo) lo = $1; if ($1 > hi) hi = $1 } END { exit !(NR > 0 && hi - lo < 5) }' ||
        { echo "the survivors failed too far apart"; return 1; }
}

# Where the MPI ends the job on a death, it failed (rc, from the last run).
# Hydra always ends it itself. Open MPI 5's launcher mostly does, but once
# every rank of a host was killed it was seen to keep the job until
# hosts-run's --timeout after a survivor's MPI aborted, in one run of three
# (why is not known): under it the time-out counts as the end.
job_ended_by_mpi() {
    [ "$rc" != 0 ] && { [ "$rc" != 124 ] || [ "$launcher_kind" = prrte ]; }
}

# --- a rank killed by har's test hook, at two moments ----------------------
hook_kill() {  # hook_kill VICTIM:POINT[:N] HOST [RANKS PER HOST [HOSTS]]
    dead=${1%%:*} per=${3:-2} nh=${4:-2}
    ranks=$(seq 0 $((nh * per - 1)))
    env HAR_TEST_KILL="$1" HAR_VERBOSE=1 $run --timeout 12 $recovery "$nh" "$per" -- "$victim" > "$tmp/log" 2>&1
    rc=$?
    cat "$tmp/log"
    grep -q "HAR_TEST_KILL: world rank $dead dies" "$tmp/log" && residue_ok "$tmp/log" "$victim" || return 1
    if [ "$launcher_kind" = orte ] && [ "$per" = 1 ]; then
        # Its own MPI_Finalize may then wait for ever (DESIGN.md note 22):
        # the job ends by --timeout, after har's part.
        survivors "$tmp/log" "$dead" "rank $dead (world rank $dead, host $2) died (found by .*its connection across nodes"
    elif [ "$launcher_kind" = orte ]; then
        survivors "$tmp/log" "$dead" "rank $dead (world rank $dead, host $2) died" finalized
    else
        job_ended_by_mpi
    fi
}
hcheck "a rank on h1 killed in the ring (HAR_TEST_KILL=1:ring:2): the others fail naming it and its host$only" hook_kill 1:ring:2 h1
hcheck "a rank on h2 killed before signalling its input (HAR_TEST_KILL=3:input:2)$only" hook_kill 3:input:2 h2
hcheck "a rank on h2 killed in the recursive doubling (HAR_TEST_KILL=2:doubling:1)$only" hook_kill 2:doubling:1 h2
# Hosts of one rank: nobody is left on the victim's host, and its
# neighbours learn of the death from the death watch. Three hosts, so that
# every rank is the victim's neighbour and rank 2 never writes to it (in
# the ring it sends to rank 0; in the doubling rank 0 is its partner):
# Open MPI 4.1's TCP transport may end a rank whose write meets the dead
# one's reset, or spin in its progress, which survivors allows for one rank.
hcheck "3 hosts of 1, the rank on h2 killed in the ring: the death watch tells the others$only" \
    hook_kill 1:ring:2 h2 1 3
hcheck "3 hosts of 1, the rank on h2 killed in the recursive doubling$only" hook_kill 1:doubling:2 h2 1 3
ranks="0 1 2 3"

# --- kill -9 from outside, inside h2's PID namespace -----------------------
# kill_in_h2 N [hosts-run options]: 2 hosts of 2 in a long loop of
# all-reduces; once N victims run in h2, 3 s in, kill -9 N of them there;
# the job's status in $rc, its log in $tmp/log. Fails if none was killed,
# or something is left behind.
kill_in_h2() {
    n=$1
    shift
    rm -rf "$tmp/st"
    env HAR_VERBOSE=1 $run --timeout 20 --state "$tmp/st" $recovery "$@" 2 2 -- "$victim" "$calls" > "$tmp/log" 2>&1 &
    job=$!
    for _ in $(seq 100); do
        [ -s "$tmp/st/h2.pid" ] && [ "$(in_host "$tmp/st" h2 pgrep -x victim | wc -l)" -ge "$n" ] && break
        sleep 0.1
    done
    sleep 3  # inside the loop of all-reduces
    victims=$(in_host "$tmp/st" h2 pgrep -x victim | head -"$n" | tr '\n' ' ')
    echo "killing victim(s) $victims (in h2's PID namespace)"
    # Stopped first, then killed: several victims die "at once" only if
    # none lives on to see another's death and tell the other host first.
    [ -n "$victims" ] && in_host "$tmp/st" h2 kill -STOP $victims && in_host "$tmp/st" h2 kill -KILL $victims
    pids=$(cat "$tmp/st"/*.pid)
    wait $job
    rc=$?
    cat "$tmp/log"
    [ -n "$victims" ] && residue_ok "$tmp/log" "$victim" && gone $pids
}
outside_kill() {  # outside_kill [hosts-run options]
    kill_in_h2 1 "$@" || return 1
    if [ "$launcher_kind" = orte ]; then
        # Open MPI's TCP transport may end a rank whose peer hung up (and
        # har then names that one, as the first death it learnt of): every
        # rank that came back from its call must have failed naming a dead
        # rank and its host, at least two did, within 5 s of each other.
        n=0
        for r in $(sed -n 's/^victim: rank \([0-9]*\): failed at call.*/\1/p' "$tmp/log"); do
            grep -q "^har\[$r .*rank [0-3] (world rank [0-3], host h[12]) died" "$tmp/log" || { echo "rank $r: no message"; return 1; }
            n=$((n + 1))
        done
        dead=$(sed -n 's/^har\[[0-9]* h[12]\] error: rank [0-9]*: rank \([0-3]\) (world rank [0-3], host h[12]) died.*/\1/p' "$tmp/log" | head -1)
        [ $n -ge 2 ] && [ -n "$dead" ] && survivors_time "$tmp/log"
    else
        job_ended_by_mpi
    fi
}
hcheck "a rank on h2 killed by kill -9 in its host: the ranks that come back fail naming a dead rank and its host$only" outside_kill
# The same over a link shaped to 100 Mbit/s, so that ring messages are in
# flight when the rank dies: a survivor abandons its requests (a receive
# already matched cannot be cancelled), and its MPI must not then touch
# memory that har has freed, in MPI_Finalize or before.
freed_memory() {
    # The survivors as outside_kill judges them (Open MPI's transport may end
    # one, or keep it in its own progress, which is the MPI's to bound), and
    # none of them touching memory har freed.
    outside_kill --rate 100mbit || return 1
    ! grep -q "Bad address\|Segmentation fault\|FATAL" "$tmp/log"
}
if [ "$launcher_kind" != orte ]; then
    tap_skip "killed mid-transfer (link at 100 Mbit/s): no survivor's MPI touches memory har freed" "the MPI leaves no survivors"
else
    hcheck "killed mid-transfer (link at 100 Mbit/s): no survivor's MPI writes to or reads from memory har freed" freed_memory
fi

# Every rank of h2 killed at once: no rank is left on h2 to tell, and h1's
# ranks hear it through the death watch across hosts (HAR_WATCH). Open
# MPI's transport may keep one of them in its own progress (lost_to_mpi),
# or end it by SIGPIPE as it writes to a dead peer's socket: every rank
# that comes back must have failed naming a rank of h2 (or the rank of h1
# that SIGPIPE ended, which its node saw die first), and at least one
# must come back.
whole_host_kill() {
    kill_in_h2 2 || return 1
    if [ "$launcher_kind" = orte ]; then
        n=0
        piped=$(sed -n 's/^victim: rank \([01]\): ended by SIGPIPE$/\1/p' "$tmp/log" | head -1)
        for r in $(sed -n 's/^victim: rank \([01]\): failed at call.*/\1/p' "$tmp/log"); do
            grep -q "^har\[$r .*rank [23] (world rank [23], host h2) died (found by rank [01] .*connection across nodes" "$tmp/log" ||
                { [ -n "$piped" ] && grep -q "^har\[$r .*rank $piped (world rank $piped, host h1) died" "$tmp/log"; } ||
                { echo "rank $r: no message naming the death watch"; return 1; }
            n=$((n + 1))
        done
        [ $n -ge 1 ] && survivors_time "$tmp/log"
    else
        job_ended_by_mpi
    fi
}
hcheck "every rank of h2 killed at once: h1's ranks that come back fail naming a rank of h2, learnt from the death watch$only" \
    whole_host_kill

# --- h2's link cut --------------------------------------------------------
# Nothing crosses a cut link, so HAR_TIMEOUT ends the waits on both sides,
# and h2's output reaches the launcher only once the link is back: h1's
# ranks must fail within HAR_TIMEOUT and a margin of the cut; once the link
# is up again, every rank has failed at about the same moment, and the job
# ends normally.
cut_link() {
    rm -rf "$tmp/st"
    env HAR_TIMEOUT=3 HAR_VERBOSE=1 $run --timeout 90 --state "$tmp/st" 2 2 -- "$victim" "$calls" > "$tmp/log" 2>&1 &
    job=$!
    for _ in $(seq 100); do [ -s "$tmp/st/h2.pid" ] && [ -n "$(in_host "$tmp/st" h2 pgrep -x victim)" ] && break; sleep 0.1; done
    sleep 3
    nsenter -t "$(cat "$tmp/st/bridge.pid")" -n ip link set veth-h2 down
    start=$(date +%s)
    wait_for "$tmp/log" "^victim: rank [01]: failed at call" 2 12
    ok=$?
    took=$(($(date +%s) - start))
    echo "h1's ranks failed $took s after the cut"
    nsenter -t "$(cat "$tmp/st/bridge.pid")" -n ip link set veth-h2 up
    pids=$(cat "$tmp/st"/*.pid)
    wait $job
    rc=$?
    cat "$tmp/log"
    [ $ok = 0 ] && [ $rc = 0 ] && ends_clean "$tmp/log" && residue_ok "$tmp/log" "$victim" && gone $pids &&
        survivors "$tmp/log" -1 "rank [0-9] .*did not come within HAR_TIMEOUT" finalized &&
        grep -q "^har\[[01] h1\] .*rank [23] .*did not come within HAR_TIMEOUT" "$tmp/log" &&
        grep -q "^har\[[23] h2\] .*rank [01] .*did not come within HAR_TIMEOUT" "$tmp/log"
}
hcheck "h2's link cut (HAR_TIMEOUT=3): every rank on both hosts fails naming a rank across the cut, the job ends" cut_link
cp "$tmp/log" "$tmp/cut"
check "across the cut, the ranks name the rank they waited for by its world rank and host" \
    sh -c 'grep -q "^har\[[01] h1\] .*rank [23] (world rank [23], host h2) did not come" "$1" &&
        grep -q "^har\[[23] h2\] .*rank [01] (world rank [01], host h1) did not come" "$1"' sh "$tmp/cut"

# --- a stopped rank -------------------------------------------------------
stopped() {
    env HAR_TIMEOUT=2 $hosts 2 2 -- "$bin/mpi/stopped_peer" > "$tmp/log" 2>&1
    rc=$?
    cat "$tmp/log"
    cp "$tmp/log" "$tmp/stopped"
    [ $rc = 0 ] && [ "$(grep -c "rank [0-3]: rank 1 .*did not come within HAR_TIMEOUT" "$tmp/log")" = 4 ] &&
        [ "$(grep -c 'as expected' "$tmp/log")" = 4 ]
}
hcheck "a rank on h1 stopped (SIGSTOP, HAR_TIMEOUT=2): all 4 ranks fail naming it, later calls fail, none hangs" stopped
# A rank that waits for its ring partner on another host names it by its
# world rank and host too (the ring's set-up told it who its left is).
check "every rank names the stopped rank's world rank and host" \
    test "$(grep -c "rank [0-3]: rank 1 (world rank 1, host h1) did not come within HAR_TIMEOUT" "$tmp/stopped")" = 4

# --- hosts-run's own bounds -------------------------------------------------
# (on `sleep`, which needs no har: --lib none, so that they run whichever
# builds there are)
never_ends() {
    start=$(date +%s)
    $run --lib none --timeout 3 2 1 -- sleep 600 > "$tmp/log" 2>&1
    rc=$?
    took=$(($(date +%s) - start))
    cat "$tmp/log"; echo "took $took s"
    [ $rc = 124 ] && [ $took -lt 20 ] && grep -q "timed out after 3 s" "$tmp/log" && ! grep -q "left after teardown" "$tmp/log"
}
hcheck "a program that never ends: --timeout 3 ends it with status 124, every process killed" never_ends

killed_runner() {
    rm -rf "$tmp/st" "$tmp/tmpdir"
    mkdir "$tmp/tmpdir"
    TMPDIR="$tmp/tmpdir" $run --lib none --timeout 600 --state "$tmp/st" 2 1 -- sleep 600 > "$tmp/log" 2>&1 &
    job=$!
    for _ in $(seq 100); do [ -s "$tmp/st/h2.pid" ] && [ -n "$(in_host "$tmp/st" h2 pgrep -x sleep | sed -n 2p)" ] && break; sleep 0.1; done
    pids=$(cat "$tmp/st"/*.pid)
    nets=$(for p in $pids; do readlink /proc/$p/ns/net; done)
    kill -KILL $job
    wait $job 2> /dev/null
    gone $pids || return 1
    # the launcher goes once its daemons or proxies have gone with the hosts
    for _ in $(seq 100); do
        left=""
        for p in /proc/[0-9]*; do
            n=$(readlink $p/ns/net 2> /dev/null) || continue
            case " $(echo $nets) " in *" $n "*) left="$left ${p#/proc/}" ;; esac
        done
        [ -z "$left" ] && break
        sleep 0.1
    done
    echo "left in the namespaces: ${left:-nothing}; in TMPDIR: $(ls "$tmp/tmpdir")"
    [ -n "$pids" ] && [ -z "$left" ]
}
hcheck "hosts-run killed by SIGKILL: every host and the launcher's namespace go with it" killed_runner

# A rank's bad buffer and a rank that leaves, across hosts: every other
# rank, on either host, fails the call at once with har's message (the
# rank's own node at the arrival, the other host by the notice or the
# death watch's "bye"), and the job ends by itself.
bad_buffer() {  # bad_buffer HOSTS RANKS RANK
    $hosts "$1" "$2" -- "$bin/mpi/bad_buffer" null-recv --rank "$3" > "$tmp/log" 2>&1
    s=$?
    cat "$tmp/log"
    [ $s = 0 ] && [ "$(grep -c "as expected" "$tmp/log")" = $(($1 * $2)) ] &&
        [ "$(grep -c "rank $3 (world rank $3, host h[0-9]) passed an invalid buffer" "$tmp/log")" = $(($1 * $2)) ]
}
hcheck "2 hosts of 2, a null receive buffer on rank 3 only: every rank fails at once, naming it" bad_buffer 2 2 3
hcheck "2 hosts of 1, a null receive buffer on rank 1 only: both fail at once, naming it" bad_buffer 2 1 1
left_across() {
    $hosts 2 2 -- "$bin/mpi/left" > "$tmp/log" 2>&1
    s=$?
    cat "$tmp/log"
    [ $s = 0 ] && [ "$(grep -c "as expected" "$tmp/log")" = 4 ] && ! grep -q "rank 1 (world rank 1, host h1) died" "$tmp/log" &&
        for r in 0 2 3; do grep -q "^har\[$r .*rank 1 (world rank 1, host h1) left (MPI_Finalize" "$tmp/log" || return 1; done
}
hcheck "2 hosts of 2, rank 1 finalizes after another communicator failed: the others say it left" left_across
done_testing
