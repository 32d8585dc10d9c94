#!/bin/sh
# har-info --topology: one process and under mpirun, human and JSON; the
# JSON parses, and --measure's small all-reduce went through the node
# segment (on a machine without GPUs: the host path, and no GPU claimed).
. "$top_srcdir/tests/lib.sh"
info="$top_builddir/har-info"
check "one process: the check-up prints" sh -c "'$info' --topology | grep -q 'engines for device buffers here'"
$mpi 2 "$info" --topology --json --measure > "$tmp/json" 2>&1
python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
assert len(d["ranks"]) == 2, d["ranks"]
assert "host_segment" in d["small_allreduce_us"]["host_paths"], d["small_allreduce_us"]
assert d["small_allreduce_us"]["host"] > 0
assert all(r["rank_cpus"] for r in d["ranks"])' "$tmp/json" >> "$tmp/json" 2>&1
tap_result $? "2 ranks, --json --measure: JSON that parses, one entry per rank, a timed call through the host segment" "$tmp/json"
done_testing
