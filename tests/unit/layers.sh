#!/bin/sh
# The folders keep their layers (src/LAYERS, lowest first): every
# #include "..." of src/ and mpi_wrappers/ names a header of the includer's
# layer or a lower one, and every folder of src/ has its layer.
# No two source files of the installed library call into each other in a
# loop, directly or through others: from the object files' defined and
# undefined symbols, a file depends on every file that defines a symbol it
# uses, and that graph must sort (tsort) with no loop. And the functions
# a folder's files share are named after the folder.
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

# include_arrows LAYERS ROOT: "FILE -> HEADER (from layer to layer)" for each
# include that runs up the order; "unlisted FOLDER" for a folder of
# ROOT/src with no layer, or a source file outside the folders.
include_arrows() {
    awk '!/^#/ && NF { n++; for (i = 1; i <= NF; i++) print $i, n }' "$1" > "$tmp/layer_of"
    (cd "$2" && find src mpi_wrappers -type f \( -name '*.c' -o -name '*.h' -o -name '*.cu' \) | sort |
        while read -r f; do
            grep -o '^[[:space:]]*#[[:space:]]*include[[:space:]]*"[^"]*"' "$f" | sed 's/.*"\(.*\)"/\1/' |
                while read -r h; do echo "$f $h"; done
            [ -n "$(grep -o '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$f")" ] || echo "$f -"
        done) |
    awk 'NR == FNR { layer[$1] = $2; next }
         { f = $1; d = f; sub(/^src\//, "", d); sub(/\/[^\/]*$/, "", d)
           if (!(d in layer)) { if (!(d in said)) print "unlisted " d; said[d] = 1; next }
           if ($2 == "-" || $2 ~ /^har(_version)?\.h$/) next
           h = $2; hd = h; if (hd ~ /\//) sub(/\/.*$/, "", hd); else hd = d
           if (!(hd in layer)) { print f " -> " h " (no layer)"; next }
           if (layer[hd] > layer[d]) print f " -> " h " (" d ", layer " layer[d] ", includes " hd ", layer " layer[hd] ")" }' \
        "$tmp/layer_of" -
}
include_arrows "$top_srcdir/src/LAYERS" "$top_srcdir" > "$tmp/arrows"
{ echo "includes that run up src/LAYERS or folders without a layer:"; cat "$tmp/arrows"; } > "$tmp/out"
[ ! -s "$tmp/arrows" ] && [ "$(wc -l < "$tmp/layer_of")" -ge 10 ]
tap_result $? "no include runs up the layers of src/LAYERS, and every folder has one" "$tmp/out"
# The check itself: with core moved last, it finds the includes of it.
awk '!/^#/ && NF && $1 != "core"' "$top_srcdir/src/LAYERS" > "$tmp/swapped"; echo core >> "$tmp/swapped"
include_arrows "$tmp/swapped" "$top_srcdir" > "$tmp/arrows2"
grep -q 'includes core' "$tmp/arrows2"
tap_result $? "the same check finds the includes of core made to run up" "$tmp/arrows2"

# prefix_strays SYMBOLS: "FILE SYMBOL" for each har_ function or variable a
# file of src/FOLDER defines that is not named har_FOLDER_* (engines:
# har_engine_*); core's names are the vocabulary of every layer, entry's
# are named after the MPI calls they serve, tools' are programs.
prefix_strays() {
    awk '$1 == "D" && $2 ~ /^har_/ { d = $3; sub(/^src\//, "", d); sub(/\/.*$/, "", d)
             if (d == "core" || d == "entry" || d == "tools") next
             p = d; sub(/s$/, "", p)
             if (index($2, "har_" p "_") != 1 && $2 != "har_" p && $2 != "har_" d) print $3, $2 }' "$1"
}
prefix_strays "$tmp/symbols" > "$tmp/strays"
{ echo "functions and variables not named after their folder:"; cat "$tmp/strays"; } > "$tmp/out"
[ ! -s "$tmp/strays" ] && [ "$(grep -c '^D har_' "$tmp/symbols")" -ge 50 ]
tap_result $? "every function a folder's files share is named after the folder (har_cuda_*, har_node_*, ...)" "$tmp/out"
# The check itself: a node function named like a segment's is found.
{ cat "$tmp/symbols"; echo "D har_seg_wait src/node/segment"; } > "$tmp/symbols2"
prefix_strays "$tmp/symbols2" > "$tmp/strays2"
grep -q 'har_seg_wait' "$tmp/strays2"
tap_result $? "the same check finds a function of src/node named har_seg_*" "$tmp/strays2"
done_testing
