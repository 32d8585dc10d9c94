#!/bin/sh
# The README's variable table is the one generated from har's table, and an
# unknown HAR_* name is warned about with the closest known one.
. "$top_srcdir/tests/lib.sh"
info="$top_builddir/har-info"
"$info" --variables > "$tmp/table"
sed -n '/<!-- variables:begin -->/,/<!-- variables:end -->/p' "$top_srcdir/README.md" | sed '1d;$d' > "$tmp/readme"
cmp -s "$tmp/table" "$tmp/readme"
tap_result $? "README variable table matches har-info --variables (scripts/update-readme regenerates it)"
env HAR_SLOT_BYTE=1 HAR_VERBOSE=1 $mpi 1 "$info" > "$tmp/out" 2>&1
grep -q "unknown variable HAR_SLOT_BYTE ignored (did you mean HAR_SLOT_BYTES?)" "$tmp/out"
tap_result $? "unknown HAR_SLOT_BYTE: warning names HAR_SLOT_BYTES" "$tmp/out"
env HAR_SLOT_BYTES=64K $mpi 1 "$info" > "$tmp/out" 2>&1
grep -q "HAR_SLOT_BYTES *= 64K *(environment)" "$tmp/out"
tap_result $? "har-info shows a variable's value and its source" "$tmp/out"
done_testing
