# Sourced by the TAP test scripts: numbering, running MPI jobs, logs.
# Each check prints one TAP line; its output goes to the log (# lines) only
# when it fails, with the command and the HAR_* environment that rerun it.
# HAR_TEST_PREFIX (a command and its arguments, such as "valgrind -q")
# runs every MPI rank under it (tests/mpirun.sh). HAR_TEST_SELECT (an
# extended regular expression) runs only the checks whose descriptions it
# matches; HAR_TEST_PART=K/N only the K-th of N parts of them (by a hash of
# the description, so that a long suite can run in several sittings); the
# others are skipped, visibly. HAR_TEST_PROGRESS=FILE appends every TAP
# line to FILE at once, with the seconds since the script began (the
# harness's log fills in blocks).
tap_n=0
tap_started=$(date +%s)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
bin="$top_builddir/tests"
# Stale har segments in /dev/shm, left by processes that died: what a
# check must not leave behind. Those of jobs still running (checks run side
# by side under make -j) are not counted.
shm_residue() { "$top_builddir/har-info" --stale; }

# HAR_TEST_PART must be K/N with 1 <= K <= N, or a run would skip every
# check and pass.
case "${HAR_TEST_PART:-}" in
"") ;;
[1-9]*/[1-9]*)
    case "${HAR_TEST_PART%/*}${HAR_TEST_PART#*/}" in *[!0-9]*) part_bad=1 ;; esac
    [ -z "${part_bad:-}" ] && [ "${HAR_TEST_PART%/*}" -le "${HAR_TEST_PART#*/}" ] || part_bad=1 ;;
*) part_bad=1 ;;
esac
[ -z "${part_bad:-}" ] || { echo "Bail out! HAR_TEST_PART=$HAR_TEST_PART: not K/N with 1 <= K <= N"; exit 1; }
# in_part DESCRIPTION: does the description fall in HAR_TEST_PART?
in_part() {
    [ -n "${HAR_TEST_PART:-}" ] || return 0
    printf '%s' "$1" | cksum | awk -v k="${HAR_TEST_PART%/*}" -v n="${HAR_TEST_PART#*/}" '{ exit !($1 % n == k - 1) }'
}
# selected DESCRIPTION: is this check to run (HAR_TEST_SELECT, HAR_TEST_PART)?
selected() {
    { [ -z "${HAR_TEST_SELECT:-}" ] || printf '%s\n' "$1" | grep -Eq -- "$HAR_TEST_SELECT"; } && in_part "$1"
}
skip_why() {
    if [ -n "${HAR_TEST_PART:-}" ] && ! in_part "$1"; then echo "another part (HAR_TEST_PART)"
    else echo "not selected (HAR_TEST_SELECT)"; fi
}
progress() {
    [ -z "${HAR_TEST_PROGRESS:-}" ] ||
        echo "${0##*/}: $1 ($(( $(date +%s) - tap_started )) s)" >> "$HAR_TEST_PROGRESS"
}
# runs DESCRIPTION: selected, or skipped here (saying why) and false.
runs() { selected "$1" || { tap_skip "$1" "$(skip_why "$1")"; return 1; }; }

# tap_report STATUS DESCRIPTION [LOGFILE]: one TAP line, whatever the
# selection (for checks decided to run already, and for failures that
# every part must report, such as a GPU required and missing).
tap_report() {
    tap_n=$((tap_n + 1))
    if [ "$1" = 0 ]; then
        echo "ok $tap_n - $2"
        progress "ok $tap_n - $2"
    else
        echo "not ok $tap_n - $2"
        progress "not ok $tap_n - $2"
        [ -n "$3" ] && sed 's/^/# /' "$3" | tail -n 40 | cut -c1-2000
    fi
}
tap_result() {  # tap_result STATUS DESCRIPTION [LOGFILE]: the same, if selected
    runs "$2" && tap_report "$@"
}
tap_skip() { tap_n=$((tap_n + 1)); echo "ok $tap_n - $1 # SKIP $2"; progress "ok $tap_n - $1 # SKIP $2"; }
# tap_after STATUS DESCRIPTION [LOGFILE]: a result read from the output of
# the check just before, reported where that check ran.
tap_after() {
    if [ "${last_check_ran:-0}" = 1 ]; then tap_report "$@"
    else tap_skip "$2" "the check whose output it reads did not run here"; fi
}

# How to run a failed check again, by hand, from the build directory.
rerun_line() {
    {
        printf 'rerun: cd %s &&' "$top_builddir"
        env | grep '^HAR_' | sort | while IFS= read -r v; do printf " %s" "$v"; done
        for a in "$@"; do case "$a" in *[!A-Za-z0-9_./:=,+-]*) printf " '%s'" "$a" ;; *) printf ' %s' "$a" ;; esac; done
        printf '\n'
    } >> "$tmp/out"
}

# check DESCRIPTION COMMAND...: passes when the command exits 0.
check() {
    desc="$1" last_check_ran=0; shift
    runs "$desc" || return
    last_check_ran=1
    "$@" > "$tmp/out" 2>&1
    rc=$?
    [ $rc = 0 ] || rerun_line "$@"
    tap_report $rc "$desc" "$tmp/out"
}

# check_fails DESCRIPTION PATTERN COMMAND...: passes when the command fails
# and its output contains PATTERN (proves a check can fail, and says why).
check_fails() {
    desc="$1" pattern="$2" last_check_ran=0; shift 2
    runs "$desc" || return
    last_check_ran=1
    if "$@" > "$tmp/out" 2>&1; then
        rerun_line "$@"
        tap_report 1 "$desc (it succeeded)" "$tmp/out"
    else
        grep -q -- "$pattern" "$tmp/out"
        rc=$?
        [ $rc = 0 ] || { echo "expected in the output: $pattern" >> "$tmp/out"; rerun_line "$@"; }
        tap_report $rc "$desc" "$tmp/out"
    fi
}

# $mpi NP PROGRAM ARGS...: NP ranks through the suite's launcher (a path,
# not a function, so that `env VAR=value $mpi ...` works).
mpi="$bin/mpirun.sh"

# Does the MPI itself check arguments? 0 where a null datatype gets an error
# class from it (without har); else 1: MPICH 5.0 from the Python package
# index asserts and aborts instead, so har's answer cannot be compared.
mpi_checks_arguments() {
    $mpi 2 "$bin/mpi/bad_input" datatype > "$tmp/argcheck" 2>&1 && grep -q "datatype: error" "$tmp/argcheck"
}
no_argument_checks="this MPI does not check arguments (a null datatype aborts it, without har too)"

# The tests assert which path serves each call from the one-shot thresholds;
# tuning.sh sets its own tables (the shipped one would steer some sizes).
export HAR_TUNING="${HAR_TUNING:-none}"

# A seed for sampled runs: fixed by HAR_TEST_SEED, else new each run (printed).
test_seed() { echo "${HAR_TEST_SEED:-$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')}"; }

done_testing() { echo "1..$tap_n"; }

# gpu_suite PROGRAM: go on only where PROGRAM was built (har with CUDA) and
# a GPU is visible (tests/gpu/stress --probe); else end the suite, skipped,
# or failed under HAR_TEST_REQUIRE_GPU=1.
gpu_suite() {
    if [ ! -x "$1" ]; then
        [ "${HAR_TEST_REQUIRE_GPU:-0}" = 1 ] &&
            { tap_report 1 "GPU tests required but har was built without CUDA"; done_testing; exit 0; }
        echo "1..0 # SKIP har built without CUDA"; exit 0
    fi
    "$bin/gpu/stress" --probe > "$tmp/probe" 2>&1
    case $? in
    0) ;;
    77) echo "1..0 # SKIP no GPU visible"; exit 0 ;;
    *) tap_report 1 "a GPU is required (HAR_TEST_REQUIRE_GPU=1) and none is visible" "$tmp/probe"; done_testing; exit 0 ;;
    esac
}

# fortran_compiler: $fc, this MPI's Fortran compiler (beside $MPICC), or
# the whole test skipped, saying so.
fortran_compiler() {
    fc=$(echo "${MPICC:-mpicc}" | sed 's/mpicc/mpifort/')
    command -v "$fc" > /dev/null 2>&1 || { echo "1..0 # SKIP no Fortran compiler $fc"; exit 0; }
}

# fortran_builds BINDING SOURCE FLAGS...: builds a Fortran test program
# with this MPI's Fortran compiler ($fc) twice, as two checks:
# $tmp/relinked, linked with -lhar, and $tmp/linked, with the test build.
# The test build is a static archive: its entry points are pulled in and
# exported, so that the MPI's own Fortran library finds them (MPI_Wait too:
# MPICH's Fortran MPI_WAIT calls the C one, which nothing in a program names).
fortran_builds() {
    binding=$1 source=$2
    shift 2
    "$fc" "$@" -o "$tmp/relinked" "$source" -L"$top_builddir/.libs" -lhar -Wl,-rpath,"$top_builddir/.libs" \
        > "$tmp/cc" 2>&1
    tap_result $? "$binding: ${source##*/} builds with $fc, relinked with -lhar" "$tmp/cc"
    "$top_builddir/libtool" --tag=CC --mode=link "$fc" "$@" -o "$tmp/linked" "$source" \
        "$top_builddir/libhar-test.la" -Wl,-u,MPI_Init -Wl,-u,MPI_Iallreduce -Wl,-u,MPI_Bcast -Wl,-u,MPI_Wait \
        -Wl,--export-dynamic > "$tmp/cc" 2>&1
    tap_result $? "$binding: ${source##*/} links with the test build" "$tmp/cc"
}
