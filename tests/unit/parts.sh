#!/bin/sh
# HAR_TEST_PART=K/N (tests/lib.sh): the N parts of a script's checks run
# each check exactly once between them, and each part skips the others'
# checks visibly.
. "$top_srcdir/tests/lib.sh"
cases=40
for k in 1 2 3; do
    HAR_TEST_PART=$k/3 HAR_TEST_PROGRESS="$tmp/progress$k" sh -c '
        . "$top_srcdir/tests/lib.sh"
        i=1; while [ $i -le '$cases' ]; do check "case $i" true; i=$((i + 1)); done' > "$tmp/part$k"
done
cat "$tmp"/part1 "$tmp"/part2 "$tmp"/part3 | grep -v '# SKIP' | sed 's/^ok [0-9]* - //' | sort > "$tmp/ran"
{ echo "checks run by the three parts:"; cat "$tmp/ran"; } > "$tmp/out"
[ "$(wc -l < "$tmp/ran")" = $cases ] && [ "$(sort -u "$tmp/ran" | wc -l)" = $cases ] &&
    for k in 1 2 3; do
        [ "$(grep -c '# SKIP another part (HAR_TEST_PART)' "$tmp/part$k")" = $((cases - $(grep -vc '# SKIP' "$tmp/part$k"))) ] &&
            [ "$(grep -vc '# SKIP' "$tmp/part$k")" -gt 0 ] || exit_code=1
    done && [ -z "${exit_code:-}" ]
tap_result $? "HAR_TEST_PART=1/3, 2/3, 3/3: each of $cases checks runs in exactly one part, the others skip it, saying so" "$tmp/out"
cat "$tmp"/progress1 "$tmp"/progress2 "$tmp"/progress3 > "$tmp/progress"
[ "$(wc -l < "$tmp/progress")" = $((3 * cases)) ] && grep -q '^ok [0-9]* - case [0-9]* ([0-9]* s)$' "$tmp/progress"
tap_result $? "HAR_TEST_PROGRESS: every TAP line, with its time, as it ends" "$tmp/progress"
done_testing
