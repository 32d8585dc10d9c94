#!/bin/sh
# The tuning table and HAR_ALGO steer the plan: a table's rows each serve
# their sizes on the machine class they name and nowhere else, a table
# har-bench --tuning writes is the one har-info --derive-tuning derives from
# its CSV and har follows it, a bad table is refused with the reason named,
# and the shipped table is the one derived from the committed measurements.
. "$top_srcdir/tests/lib.sh"
prog="$bin/mpi/check_allreduce"
info="$top_builddir/har-info"
rows() { grep -v '^#' "$1" | sed '/^ *$/d'; }
expect_of() { echo "$1" | tr + ,; }  # a choice's paths, as --expect takes them

# The shipped table and the committed --tuning CSVs agree.
set -- "$top_srcdir"/src/plan/measurements/*.csv
if [ -e "$1" ]; then "$info" --derive-tuning "$@" > "$tmp/derived" 2> "$tmp/out"; else : > "$tmp/derived"; fi
rows "$tmp/derived" > "$tmp/derived.rows"
rows "$top_srcdir/src/plan/tuning.txt" > "$tmp/shipped.rows"
diff "$tmp/derived.rows" "$tmp/shipped.rows" >> "$tmp/out" 2>&1
tap_result $? "src/plan/tuning.txt is what har-info --derive-tuning makes of src/plan/measurements/*.csv" "$tmp/out"

# A hand-written table for any machine ("*"), int (4-byte) elements.
cat > "$tmp/table" <<'T'
# memory class ranks_per_node nodes up_to_bytes choice
host * 2 1 256 host_segment+two_shot
host * 2 1 65536 host_segment+one_shot
host * 3 1 inf mpi
host * 2 2 inf mpi
host * 2 1 inf mpi
T
for region in "7,64 host_segment+two_shot" "65,1000,16384 host_segment+one_shot" "16385,300001 mpi"; do
    set -- $region
    check "HAR_TUNING table, 2 ranks, counts $1: $2" \
        env HAR_TUNING="$tmp/table" $mpi 2 "$prog" --counts "$1" --types int,float --comms 2 --expect "$(expect_of "$2")"
done
check "HAR_TUNING table: 3 ranks read their own row (mpi at every size)" \
    env HAR_TUNING="$tmp/table" $mpi 3 "$prog" --counts 7,1000 --types int --comms 1 --expect mpi
check "HAR_TUNING table: 4 ranks as 2 nodes of 2: rows cannot hand calls to the MPI across nodes (two-shot, doubling)" \
    env HAR_TUNING="$tmp/table" HAR_NODE_SIZE=2 $mpi 4 "$prog" --counts 7,1000 --types int --comms 2 --expect two_shot,doubling

# Rows name the machine class they were measured on.
$mpi 2 "$info" > "$tmp/info" 2>&1
cls=$(sed -n 's/^  host buffers: //p' "$tmp/info")
[ -n "$cls" ]
tap_result $? "har-info names this machine's host class (${cls:-none})" "$tmp/info"
printf 'host %s 2 1 inf host_segment+two_shot\n' "$cls" > "$tmp/mine"
check "a row of this machine's class ($cls) serves" \
    env HAR_TUNING="$tmp/mine" $mpi 2 "$prog" --counts 7 --types int --comms 1 --expect two_shot
printf 'host OTHER_CPU/%s 2 1 inf host_segment+two_shot\n' "${cls#*/}" > "$tmp/other"
check "a row of another class is not used: the thresholds decide (one-shot)" \
    env HAR_TUNING="$tmp/other" $mpi 2 "$prog" --counts 7 --types int --comms 1 --expect one_shot
env HAR_TUNING="$tmp/other" $mpi 2 "$info" > "$tmp/out" 2>&1
grep -q "host OTHER_CPU/.* not here: another machine class" "$tmp/out" && grep -q "host buffers: $cls" "$tmp/out"
tap_result $? "har-info says which rows apply here and why the others do not" "$tmp/out"

check "HAR_ALGO=host_segment+two_shot beats the table and the thresholds" \
    env HAR_TUNING="$tmp/table" HAR_ALGO=host_segment+two_shot $mpi 2 "$prog" --counts 7,1000,300001 --types int --comms 2 --expect two_shot
check "HAR_ALGO=mpi hands every call to the MPI, on 2 pretend nodes too" \
    env HAR_ALGO=mpi HAR_NODE_SIZE=1 $mpi 2 "$prog" --counts 7,1000 --types int,double --comms 2 --expect mpi
check "HAR_ALGO=nccl on host buffers: no plan meets it, the thresholds decide" \
    env HAR_ALGO=nccl $mpi 2 "$prog" --counts 7 --types int --comms 1 --expect one_shot
env HAR_ALGO=fastest $mpi 2 "$prog" --counts 7 --types int --comms 1 --expect one_shot > "$tmp/out" 2>&1 &&
    grep -q "HAR_ALGO=fastest refused" "$tmp/out"
tap_result $? "HAR_ALGO=fastest: refused with a warning, the thresholds decide" "$tmp/out"

# Bad tables are refused, saying why, and the built-in table serves.
builtin=$(grep -v '^#' "$top_srcdir/src/plan/tuning.txt" | grep -c .)
default="--expect one_shot"; [ "$builtin" -gt 0 ] && default=--any-path  # the shipped rows may steer 28 bytes elsewhere
printf 'host * 2 1 100 host_segment+two_shot\nhost two 1 inf mpi\n' > "$tmp/bad"
env HAR_TUNING="$tmp/bad" $mpi 2 "$prog" --counts 7 --types int --comms 1 $default \
    > "$tmp/out" 2>&1 && grep -q "line 2 is not" "$tmp/out"
tap_result $? "a bad table is refused, naming its line, and the built-in one serves" "$tmp/out"
mkdir -p "$tmp/dir"
env HAR_TUNING="$tmp/dir" $mpi 2 "$prog" --counts 7 --types int --comms 1 $default > "$tmp/out" 2>&1 &&
    grep -q "HAR_TUNING=.*dir refused: Is a directory" "$tmp/out"
tap_result $? "a directory is refused as a table" "$tmp/out"
env HAR_TUNING=/dev/zero $mpi 2 "$prog" --counts 7 --types int --comms 1 $default > "$tmp/out" 2>&1 &&
    grep -q "HAR_TUNING=/dev/zero refused" "$tmp/out"
tap_result $? "/dev/zero is refused as a table (no endless read)" "$tmp/out"
# A FIFO with no writer: an open that waited for one would hang the job.
mkfifo "$tmp/fifo"
env HAR_TUNING="$tmp/fifo" HAR_TEST_TIMEOUT=30 $mpi 2 "$prog" --counts 7 --types int --comms 1 $default \
    > "$tmp/out" 2>&1 && grep -q "HAR_TUNING=.*fifo refused: not a regular file" "$tmp/out"
tap_result $? "a FIFO is refused as a table, without waiting for a writer" "$tmp/out"
{ for i in $(seq 1 3000); do echo "# padding line $i of a table too large to be one"; done; } > "$tmp/huge"
env HAR_TUNING="$tmp/huge" $mpi 2 "$prog" --counts 7 --types int --comms 1 $default > "$tmp/out" 2>&1 &&
    grep -q "refused: larger than 64 KiB" "$tmp/out"
tap_result $? "a table file over 64 KiB is refused" "$tmp/out"
printf 'host * 2 1 100 host_segment+two_shot\r\n\r\nhost * 2 1 inf mpi\r\n' > "$tmp/crlf"
check "a table with CRLF line ends is read" \
    env HAR_TUNING="$tmp/crlf" $mpi 2 "$prog" --counts 7 --types int --comms 1 --expect two_shot
long="$tmp/a-directory-name-long-enough-to-pass-sixty-four-characters-as-pip-paths-do"
mkdir -p "$long" && cp "$tmp/table" "$long/table"
check "a table path of more than 64 characters is read" \
    env HAR_TUNING="$long/table" $mpi 2 "$prog" --counts 7,64 --types int --comms 1 --expect two_shot
# The default configuration: the shipped table steers, results stay right.
# It may hand sizes to the MPI, so the types are those both MPIs reduce
# correctly (README, Limitations: their 8/16-bit and unsigned bugs).
for np in 2 4; do
    check "the shipped table, $np ranks: sampled matrix, every result checked" \
        env HAR_TUNING=builtin $mpi $np "$prog" --counts 1,7,1000,65537,300001 --sample 2 --seed "$(test_seed)" --comms 2 \
        --any-path --types int,long,int32,int64,float,double
done

# har-bench --tuning: its table is har-info --derive-tuning's reading of its
# CSV, keyed by this machine's class, and har then serves each row's sizes
# by that row's choice.
$mpi 2 "$top_builddir/har-bench" --tuning "$tmp/tuned" --csv "$tmp/tune.csv" --type int --min 4 --max 256K \
    --iters 5 --warmup 1 --check > "$tmp/out" 2>&1
rc=$?
rows "$tmp/tuned" > "$tmp/tuned.rows" 2>/dev/null
"$info" --derive-tuning "$tmp/tune.csv" 2>>"$tmp/out" | grep -v '^#' > "$tmp/rederived.rows"
[ $rc = 0 ] && [ -s "$tmp/tuned.rows" ] && cmp -s "$tmp/tuned.rows" "$tmp/rederived.rows" && ! grep -q FAILED "$tmp/out" &&
    ! grep -qv "^host $cls 2 1 " "$tmp/tuned.rows"
tap_result $? "har-bench --tuning, 2 ranks, 4 B to 256 KiB: checked, its table is derive-tuning's, rows of this class" "$tmp/out"
prev=0
while read -r memory class local nodes max choice; do
    if [ "$max" = inf ]; then count=$((prev / 4 + 1)); else count=$((max / 4)); fi
    [ "$count" -ge 1 ] || count=1
    check "tuned row '$max $choice' serves $count ints by $choice" \
        env HAR_TUNING="$tmp/tuned" $mpi 2 "$prog" --counts "$count" --types int --comms 1 --expect "$(expect_of "$choice")" < /dev/null
    [ "$max" = inf ] || prev=$max
done < "$tmp/tuned.rows"
env HAR_NODE_SIZE=1 $mpi 2 "$top_builddir/har-bench" --tuning "$tmp/pretend" --min 4 --max 64 > "$tmp/out" 2>&1
[ $? != 0 ] && grep -q "pretend nodes" "$tmp/out" && [ ! -e "$tmp/pretend" ]
tap_result $? "har-bench --tuning refuses to write rows for several nodes measured on pretend nodes" "$tmp/out"
done_testing
