#!/bin/sh
# HAR_TEST_PART=K/N (tests/lib.sh): the N parts of a script's checks run
# each check exactly once between them, each part skips the others' checks
# visibly, a failure is reported in its own part whatever its text, and a
# part that is not K/N stops the script.
. "$top_srcdir/tests/lib.sh"
cases=40
# in_parts N BODY: BODY (shell) run under HAR_TEST_PART=1/N .. N/N, each
# part's TAP lines in $tmp/partK, its progress lines in $tmp/progressK.
in_parts() {
    k=1
    while [ $k -le "$1" ]; do
        HAR_TEST_SELECT= HAR_TEST_PART=$k/$1 HAR_TEST_PROGRESS="$tmp/progress$k" \
            sh -c ". \"\$top_srcdir/tests/lib.sh\"; $2" > "$tmp/part$k" 2>&1
        k=$((k + 1))
    done
}
in_parts 3 'i=1; while [ $i -le '$cases' ]; do check "case $i" true; i=$((i + 1)); done'
cat "$tmp"/part1 "$tmp"/part2 "$tmp"/part3 | grep -v '# SKIP' | sed 's/^ok [0-9]* - //' | sort > "$tmp/ran"
{ echo "checks run by the three parts:"; cat "$tmp/ran"; } > "$tmp/out"
ok=1
[ "$(wc -l < "$tmp/ran")" = $cases ] && [ "$(sort -u "$tmp/ran" | wc -l)" = $cases ] || ok=0
for k in 1 2 3; do
    ran=$(grep -vc '# SKIP' "$tmp/part$k") skipped=$(grep -c '# SKIP another part (HAR_TEST_PART)' "$tmp/part$k")
    [ "$ran" -gt 0 ] && [ $((ran + skipped)) = $cases ] || ok=0
done
[ $ok = 1 ]
tap_result $? "HAR_TEST_PART=1/3, 2/3, 3/3: each of $cases checks runs in exactly one part, the others skip it, saying so" "$tmp/out"
cat "$tmp"/progress1 "$tmp"/progress2 "$tmp"/progress3 > "$tmp/progress"
[ "$(wc -l < "$tmp/progress")" = $((3 * cases)) ] && grep -q '^sh: ok [0-9]* - case [0-9]* ([0-9]* s)$' "$tmp/progress"
tap_result $? "HAR_TEST_PROGRESS: every TAP line, with its time, as it ends" "$tmp/progress"
# check_fails whose command succeeds reports a failure under another text:
# still in its own part, once.
in_parts 3 'i=1; while [ $i -le 9 ]; do check_fails "fails $i" never true; i=$((i + 1)); done'
cat "$tmp"/part1 "$tmp"/part2 "$tmp"/part3 > "$tmp/out"
[ "$(grep -c '^not ok [0-9]* - fails [0-9]* (it succeeded)$' "$tmp/out")" = 9 ]
tap_result $? "HAR_TEST_PART: a failed check_fails is reported in its part, never skipped" "$tmp/out"
for bad in 0/3 4/3 3 a/b 1/2/3; do
    HAR_TEST_SELECT= HAR_TEST_PART=$bad sh -c '. "$top_srcdir/tests/lib.sh"; check "case" true' > "$tmp/out" 2>&1
    rc=$?
    [ $rc != 0 ] && grep -q "^Bail out! HAR_TEST_PART=$bad" "$tmp/out"
    tap_result $? "HAR_TEST_PART=$bad: the script bails out" "$tmp/out"
done
done_testing
