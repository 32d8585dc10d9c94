#!/bin/sh
# No two source files of the installed library call into each other in a
# loop, directly or through others: from the object files' defined and
# undefined symbols, a file depends on every file that defines a symbol it
# uses, and that graph must sort (tsort) with no loop.
. "$top_srcdir/tests/lib.sh"
objs=$(find "$top_builddir/src" -path '*/.libs/*.o' ! -name 'libharcore_test_la-*' | sort)
for o in $objs; do
    f=${o#"$top_builddir"/}
    f=$(echo "$f" | sed 's|/\.libs/|/|; s|\.o$||')
    nm -g --defined-only "$o" | awk -v f="$f" 'NF == 3 { print "D", $3, f }'
    nm -u "$o" | awk -v f="$f" '{ print "U", $NF, f }'
done > "$tmp/symbols"
awk '$1 == "D" { def[$2] = $3 } $1 == "U" { n++; sym[n] = $2; user[n] = $3 }
     END { for (k = 1; k <= n; k++) if ((sym[k] in def) && def[sym[k]] != user[k]) print user[k], def[sym[k]] }' \
    "$tmp/symbols" | sort -u > "$tmp/edges"
nfiles=$(awk '{ print $3 }' "$tmp/symbols" | sort -u | wc -l)
{ echo "$nfiles object files, $(wc -l < "$tmp/edges") dependencies between them"; tsort "$tmp/edges" 2>&1 >/dev/null; } > "$tmp/out"
[ "$nfiles" -ge 10 ] && tsort "$tmp/edges" > /dev/null 2>&1
tap_result $? "the library's source files depend on each other without a loop" "$tmp/out"
# The check itself: one dependency turned round makes a loop it finds.
head -1 "$tmp/edges" | awk '{ print $2, $1 }' | cat "$tmp/edges" - > "$tmp/looped"
! tsort "$tmp/looped" > /dev/null 2>&1
tap_result $? "the same check finds a loop made by turning one dependency round" "$tmp/looped"
done_testing
