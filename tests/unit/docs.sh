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
# Every raw run the documents name as results:PATH is on the branch
# `results` (scripts/save-results), where this checkout has that branch.
branch=$(git rev-parse -q --verify refs/heads/results || git rev-parse -q --verify refs/remotes/origin/results)
if [ -z "$branch" ]; then
    tap_skip "every results:PATH named in README.md and docs/*.md is on the results branch" "no results branch in this checkout"
else
    git ls-tree -r --name-only "$branch" > "$tmp/runs"
    for doc in README.md docs/*.md; do
        grep -o 'results:[A-Za-z0-9_./+*-]*[A-Za-z0-9_*]' "$doc" | sort -u | while read -r ref; do
            path=${ref#results:}
            [ "$path" = PATH ] && continue
            pattern="^$(printf '%s' "$path" | sed 's/[.+]/\\&/g; s/\*/.*/g')"
            grep -Eq "$pattern" "$tmp/runs" || echo "$doc names $ref, which the results branch lacks"
        done
    done > "$tmp/missing"
    [ -s "$tmp/runs" ] && [ ! -s "$tmp/missing" ]
    tap_result $? "every results:PATH named in README.md and docs/*.md is on the results branch" "$tmp/missing"
fi
done_testing
