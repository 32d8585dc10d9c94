#!/bin/sh
# Every source path the documents name exists: a room renamed without its
# docs following is a defect a reader meets first.
. "$top_srcdir/tests/lib.sh"
cd "$top_srcdir" || exit 1
for doc in README.md docs/*.md; do
    grep -o 'src/[A-Za-z0-9_./-]*[A-Za-z0-9_]' "$doc" | sort -u | while read -r path; do
        [ -e "$path" ] || echo "$doc names $path, which does not exist"
    done
done > "$tmp/missing"
[ ! -s "$tmp/missing" ]
tap_result $? "every src/ path named in README.md and docs/*.md exists" "$tmp/missing"
# Every raw run the documents name as results/PATH is in the tree (PATH
# may end in a prefix or hold a * for a run's variable part).
find results -type f 2>/dev/null | sort > "$tmp/runs"
for doc in README.md docs/*.md; do
    grep -o 'results/[A-Za-z0-9_./+*-]*[A-Za-z0-9_*/]' "$doc" | sort -u | while read -r path; do
        pattern="^$(printf '%s' "$path" | sed 's/[.+]/\\&/g; s/\*/.*/g')"
        grep -Eq "$pattern" "$tmp/runs" || echo "$doc names $path, which results/ lacks"
    done
done > "$tmp/missing"
[ ! -s "$tmp/missing" ]
tap_result $? "every results/PATH named in README.md and docs/*.md is in the tree" "$tmp/missing"
done_testing
