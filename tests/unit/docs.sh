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
# may end in a prefix or hold a * for a run's variable part). A release
# tarball carries the documents but not the runs.
what="every results/PATH named in README.md and docs/*.md is in the tree"
if [ ! -d results ]; then
    tap_skip "$what" "no results/ here (not a clone of the repository)"
else
    find results -type f | sort > "$tmp/runs"
    for doc in README.md docs/*.md; do
        grep -o 'results/[A-Za-z0-9_./+*-]*[A-Za-z0-9_*/]' "$doc" | sort -u | while read -r path; do
            pattern="^$(printf '%s' "$path" | sed 's/[.+]/\\&/g; s/\*/.*/g')"
            grep -Eq "$pattern" "$tmp/runs" || echo "$doc names $path, which results/ lacks"
        done
    done > "$tmp/missing"
    [ ! -s "$tmp/missing" ]
    tap_result $? "$what" "$tmp/missing"
fi
done_testing
