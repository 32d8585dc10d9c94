# Sourced by the tests across hosts, after tests/lib.sh: runs jobs on hosts
# made of namespaces (scripts/hosts-run) with this build's MPI, and skips,
# saying why, where such hosts cannot be made.
hosts_run="$top_srcdir/scripts/hosts-run"
# $hosts N R -- PROGRAM...: the suite's way to run across hosts (a path, so
# that `env VAR=value $hosts ...` works), with this build's launcher. It
# fails when hosts-run found a process or a /dev/shm file left in a host
# after the launcher ended, or a process in any of its namespaces after
# taking them down. MPICH 4.0 and 4.1's ranks get the workaround for their
# MPI_Finalize over TCP (tests/hosts/ucx_close.c).
hosts="$tmp/hosts-run"
# $hosts_args: what every hosts-run of the suite is given.
hosts_args="--launcher '$MPIEXEC'"
case "$MPI_FLAVOUR" in openmpi|mpich) hosts_args="$hosts_args --mpi $MPI_FLAVOUR" ;; esac
case "$MPI_FLAVOUR:$("$MPIEXEC" --version 2>&1 | sed -n 's/^ *Version: *//p' | head -1)" in
mpich:[0-3].*|mpich:4.[01]*) hosts_args="$hosts_args --preload '$bin/hosts/.libs/libucx_close.so'" ;;
esac
# orte (Open MPI 4), prrte (Open MPI 5) or hydra (MPICH): only Open MPI 4's
# launcher keeps the survivors of a death running (--enable-recovery).
launcher_kind=$(eval "\"$hosts_run\" $hosts_args --launcher-kind")
cat > "$hosts" << EOF
#!/usr/bin/env bash
log=\$(mktemp)
"$hosts_run" $hosts_args --timeout "\${HAR_TEST_TIMEOUT:-120}" "\$@" 2>&1 | tee "\$log"
s=\${PIPESTATUS[0]}
if ! grep -q "; nothing left in any host" "\$log" || grep -q "left after teardown" "\$log"; then
    echo "hosts: something was left in a host"; [ \$s = 0 ] && s=3
fi
rm -f "\$log"
exit \$s
EOF
chmod +x "$hosts"

# What this machine can make: hosts_why is empty where hosts with their own
# network can be made, else the reason; shared_why likewise for --shared-net.
"$hosts_run" --probe > "$tmp/probe" 2>&1
probe() { sed -n "s/^$1: //p" "$tmp/probe"; }
hosts_why="" shared_why=""
[ "$(probe 'hosts with their own network')" = yes ] ||
    hosts_why="no hosts of namespaces here: $(grep ': no' "$tmp/probe" | head -1)"
[ "$(probe 'hosts over a shared network (--shared-net)')" = yes ] ||
    shared_why="no UTS and PID namespaces here: $(grep ': no' "$tmp/probe" | head -1)"

# hcheck DESCRIPTION COMMAND...: check, or a visible skip without hosts.
hcheck() {
    if [ -n "$hosts_why" ]; then tap_skip "$1" "$hosts_why"; else check "$@"; fi
}
hcheck_fails() {
    if [ -n "$hosts_why" ]; then tap_skip "$1" "$hosts_why"; else check_fails "$@"; fi
}

# ends_clean LOG: hosts-run said that no process and no /dev/shm file was
# left in any host once the launcher had ended.
ends_clean() { grep -q "^hosts-run: .* exited with status [0-9]*; nothing left in any host" "$1"; }

# in_host STATE HOST COMMAND...: runs COMMAND in a running host's namespaces.
in_host() {
    st="$1" h="$2"; shift 2
    nsenter -t "$(cat "$st/$h.pid")" $(cat "$st/nsenter") "$@"
}

# wait_for FILE PATTERN COUNT SECONDS: until FILE has COUNT lines matching.
wait_for() {
    t=0
    while [ "$(grep -c -- "$2" "$1" 2> /dev/null)" -lt "$3" ]; do
        [ $t -ge $(($4 * 10)) ] && return 1
        sleep 0.1; t=$((t + 1))
    done
}

# gone PIDS...: none of these processes lives (after a bounded wait).
gone() {
    for _ in $(seq 50); do
        alive=0
        for p in "$@"; do kill -0 "$p" 2> /dev/null && alive=1; done
        [ $alive = 0 ] && return 0
        sleep 0.1
    done
    echo "still alive: $*"
    return 1
}
