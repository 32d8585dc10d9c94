#!/bin/sh
# Every shell script of the tests, scripts/ and .ci/ parses in the shell its
# first line names: a /bin/sh script with bash's syntax in it runs until
# it reaches that line, which in tests/gpu/gpu.sh is after minutes of GPU
# checks. /bin/sh scripts are read by dash, the plainest shell at hand (a
# bash that stands in for sh accepts what dash does not).
. "$top_srcdir/tests/lib.sh"
cd "$top_srcdir" || exit 1
what="every shell script parses in the shell its first line names (/bin/sh by dash)"
if ! command -v dash > /dev/null 2>&1; then
    tap_skip "$what" "no dash here"
else
    n=0
    for f in tests/*.sh tests/*.sh.in tests/*/*.sh scripts/* .ci/run; do
        [ -f "$f" ] || continue
        case $(head -1 "$f") in
        '#!/bin/sh'*) shell=dash ;;
        '#!/usr/bin/env bash'* | '#!/bin/bash'*) shell=bash ;;
        *) continue ;;
        esac
        n=$((n + 1))
        $shell -n "$f" 2>&1 || echo "$f does not parse under $shell"
    done > "$tmp/out"
    echo "$n scripts read" >> "$tmp/out"
    [ "$n" -ge 20 ] && ! grep -q "does not parse" "$tmp/out"
    tap_result $? "$what" "$tmp/out"
    # The check itself: a bash array in a /bin/sh script is refused.
    printf '#!/bin/sh\nf() {\n    vars=(a b)\n}\n' > "$tmp/array.sh"
    ! dash -n "$tmp/array.sh" > "$tmp/out" 2>&1
    tap_result $? "the same check refuses a bash array in a /bin/sh script" "$tmp/out"
fi
done_testing
