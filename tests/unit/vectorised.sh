#!/bin/sh
# The host reductions are compiled to packed (SIMD) instructions: under
# CFLAGS' -O2, which comes after har's -O3 on each command line, GCC 12
# left them one element at a time until configure added its vectoriser
# flags (DESIGN.md note 47). Reads the float and double sums of the
# installed-to-be library; x86-64 only, and not a debug (-O0) build.
. "$top_srcdir/tests/lib.sh"
so="$top_builddir/.libs/libhar.so"
flags=$(sed -n 's/^HAR_CFLAGS = //p' "$top_builddir/Makefile")
why=""
case "$(uname -m)" in x86_64) ;; *) why="reads x86-64 instructions only" ;; esac
command -v objdump > /dev/null 2>&1 || why="no objdump"
case " $flags " in *" -O0 "*) why="a debug build (-O0) is not vectorised" ;; esac
for fn in "sum_f32 addps" "sum_f64 addpd"; do
    set -- $fn
    if [ -n "$why" ]; then tap_skip "$1 in libhar.so uses packed $2" "$why"; continue; fi
    objdump -d --no-show-raw-insn "$so" | awk -v f="<$1>:" '$2 == f {on = 1; next} on && /^$/ {exit} on' > "$tmp/$1"
    [ -s "$tmp/$1" ] && grep -q "$2" "$tmp/$1"
    tap_result $? "$1 in libhar.so uses packed $2 (HAR_CFLAGS: $flags)" "$tmp/$1"
done
done_testing
