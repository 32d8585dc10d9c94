#!/bin/sh
# Slurm, as clusters launch: the test starts a Slurm of its own on this
# machine (munged, slurmctld and slurmd from Debian's packages, as root,
# its own configuration, ports and state folder, no cgroups, 4 CPUs
# declared on however many cores), runs an unmodified program
# (plain_app) through har with srun, sbatch and the MPI's own launcher
# inside an allocation, and stops it all at the end. Every job's tasks
# must form one job with the plain run's checksum, and every rank's
# counters must show har's host segment serving (HAR_REQUIRE_PATH). The
# MPI x launcher table, each cell asserted as it is on Debian 12:
#   Open MPI 4.1: srun --mpi=pmix works; --mpi=pmi2 fails in MPI_Init
#     (its PMI is PMIx only); mpirun inside an allocation works.
#   MPICH 4.0: srun --mpi=pmi2 works; --mpi=pmix starts every task as a
#     job of its own (it speaks PMI-1 and PMI-2 only); mpiexec inside an
#     allocation works.
. "$top_srcdir/tests/lib.sh"
app="$bin/mpi/plain_app"
harrun="$top_builddir/scripts/har-run"
lib="$top_builddir/.libs/libhar.so"
why=""
[ "$(id -u)" = 0 ] || why="needs root (its own slurmd and munged)"
for c in slurmctld slurmd srun sbatch salloc scontrol sinfo munged; do
    [ -n "$why" ] || command -v $c > /dev/null || why="no $c here (apt-get install slurmctld slurmd slurm-client munge)"
done
[ -n "$why" ] || [ -r /etc/munge/munge.key ] || why="no /etc/munge/munge.key"
if [ -n "$why" ]; then
    echo "1..0 # SKIP $why"
    exit 0
fi

st="$tmp/slurm"
mkdir -p "$st/state" "$st/spool"
host=$(hostname)
port=$((20000 + $$ % 20000))
export SLURM_CONF="$st/slurm.conf"
cat > "$SLURM_CONF" << EOF
ClusterName=har
SlurmctldHost=$host
SlurmUser=root
SlurmdUser=root
SlurmctldPort=$port
SlurmdPort=$((port + 1))
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$st/munge.sock
StateSaveLocation=$st/state
SlurmdSpoolDir=$st/spool
SlurmctldPidFile=$st/slurmctld.pid
SlurmdPidFile=$st/slurmd.pid
SlurmctldLogFile=$st/slurmctld.log
SlurmdLogFile=$st/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdParameters=config_overrides
MpiDefault=none
ReturnToService=2
NodeName=$host CPUs=4 Sockets=1 CoresPerSocket=4 ThreadsPerCore=1 RealMemory=1000 State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=10 State=UP OverSubscribe=FORCE
EOF
stop() {
    scancel --full --quiet --user=root 2> /dev/null
    for d in slurmd slurmctld munged; do
        pid=$(cat "$st/$d.pid" 2> /dev/null) && kill "$pid" 2> /dev/null
    done
    for _ in $(seq 50); do
        alive=""
        for d in slurmd slurmctld munged; do
            pid=$(cat "$st/$d.pid" 2> /dev/null) && kill -0 "$pid" 2> /dev/null && alive="$alive $d"
        done
        [ -z "$alive" ] && break
        sleep 0.1
    done
    for d in $alive; do kill -9 "$(cat "$st/$d.pid")" 2> /dev/null; done
    rm -rf "$tmp"
}
trap stop EXIT
munged --socket="$st/munge.sock" --pid-file="$st/munged.pid" --log-file="$st/munged.log" \
    --seed-file="$st/munge.seed" --key-file=/etc/munge/munge.key --force > "$st/start.log" 2>&1 &&
    slurmctld -f "$SLURM_CONF" >> "$st/start.log" 2>&1 && slurmd -f "$SLURM_CONF" >> "$st/start.log" 2>&1
up=$?
for _ in $(seq 100); do
    [ $up = 0 ] && sinfo -h -o %T 2> /dev/null | grep -q '^idle' && break
    sleep 0.2
done
if ! sinfo -h -o %T 2> /dev/null | grep -q '^idle'; then
    cat "$st/start.log" "$st"/*.log > "$tmp/out" 2> /dev/null
    tap_result 1 "a Slurm of the test's own starts (munged, slurmctld, slurmd)" "$tmp/out"
    done_testing
    exit 0
fi
tap_result 0 "a Slurm of the test's own starts (munged, slurmctld, slurmd): node $host idle"

export HAR_LIBRARY="$lib" HAR_VERBOSE=1 HAR_REQUIRE_PATH=host_segment HAR_TUNING=none
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# The plain program's checksums without har, for 2 and 4 ranks.
for n in 2 4; do
    env -u HAR_LIBRARY -u HAR_VERBOSE -u HAR_REQUIRE_PATH $mpi $n "$app" 2>&1 | sed -n 's/^plain_app: \([0-9]*\) ranks, checksum/\1/p' > "$tmp/ref$n"
done

# served N LOG: one job of N ranks with the plain run's checksum, and
# every rank's counters showing har's host segment.
served() {
    [ -s "$tmp/ref$1" ] && grep -q "^plain_app: $(cat "$tmp/ref$1" | sed 's/ / ranks, checksum /')$" "$2" &&
        [ "$(grep -c "calls per path: .*host_segment=[1-9]" "$2")" = "$1" ] && ! grep -q "not host_segment" "$2"
}
# singletons N LOG: the N tasks each started a job of its own.
singletons() { [ "$(grep -c '^plain_app: 1 ranks' "$2")" = "$1" ]; }

case "$MPI_FLAVOUR" in
openmpi) works=pmix fails=pmi2 ;;
*) works=pmi2 fails=pmix ;;
esac
timeout 120 "$harrun" srun -n 4 "$app" > "$tmp/out" 2>&1
served 4 "$tmp/out"
tap_result $? "har-run srun -n 4 (har-run picks --mpi=$works for $MPI_FLAVOUR): one job, every rank served by har" "$tmp/out"
timeout 120 "$harrun" srun --mpi=$works -n 2 "$app" > "$tmp/out" 2>&1
served 2 "$tmp/out"
tap_result $? "har-run srun --mpi=$works -n 2: one job, every rank served by har" "$tmp/out"
# The other PMI: the same outcome with har as without, which the MPI decides.
other() {  # other LOG: the outcome this MPI gives with --mpi=$fails
    case "$MPI_FLAVOUR" in
    openmpi) [ $rc != 0 ] && grep -q "MPI_Init" "$1" ;;
    *) [ $rc = 0 ] && singletons 2 "$1" ;;
    esac
}
case "$MPI_FLAVOUR" in
openmpi) what="fails in MPI_Init (PMIx only)" ;;
*) what="each task a job of its own (no PMIx)" ;;
esac
timeout 120 srun --mpi=$fails -n 2 "$app" > "$tmp/plain" 2>&1
rc=$?
other "$tmp/plain"
plain=$?
env -u HAR_REQUIRE_PATH timeout 120 "$harrun" srun --mpi=$fails -n 2 "$app" > "$tmp/out" 2>&1
rc=$?
[ $plain = 0 ] && other "$tmp/out"
tap_result $? "srun --mpi=$fails with $MPI_FLAVOUR: $what, with har as without" "$tmp/out"

# sbatch: a batch script that calls har-run srun, as a user would write it.
cat > "$tmp/job.sh" << EOF
#!/bin/sh
#SBATCH -n 4
#SBATCH -t 2
exec "$harrun" srun "$app"
EOF
timeout 150 sbatch --wait -o "$tmp/job.out" "$tmp/job.sh" > "$tmp/out" 2>&1
rc=$?
cat "$tmp/job.out" >> "$tmp/out" 2> /dev/null
[ $rc = 0 ] && served 4 "$tmp/out"
tap_result $? "sbatch -n 4 of a script running har-run srun: one job, every rank served by har" "$tmp/out"

# The MPI's own launcher inside an allocation (it starts its daemons through Slurm).
launcher=$(sed -n 's/^exec timeout -k 10 "[^"]*" "\([^"]*\)".*/\1/p' "$bin/mpirun.sh")
timeout 150 salloc -n 4 "$harrun" "$launcher" -np 4 "$app" > "$tmp/out" 2>&1
served 4 "$tmp/out"
tap_result $? "salloc -n 4 har-run $(basename "$launcher") -np 4: one job, every rank served by har" "$tmp/out"
# Every job ended: none left in the queue.
[ -z "$(squeue -h 2> /dev/null)" ]
tap_result $? "no job left in Slurm's queue" "$st/slurmctld.log"
done_testing
