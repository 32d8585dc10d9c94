#!/bin/sh
# The environment module `make install` writes (share/modulefiles/har/VERSION):
# loaded with `module load` (Debian's environment-modules), it puts har-info
# and har-run on PATH, har's pkg-config file on PKG_CONFIG_PATH, and names
# the libhar.so to preload in HAR_LIBRARY; `module unload` takes it all back.
. "$top_srcdir/tests/lib.sh"
init=/usr/share/modules/init/sh
modules="$install_prefix/share/modulefiles"
if [ ! -r "$init" ]; then
    tap_skip "module load har" "no Environment Modules here ($init)"
elif [ ! -r "$modules/har/$PACKAGE_VERSION" ] || [ ! -x "$install_prefix/bin/har-info" ]; then
    tap_skip "module load har" "har is not installed in $install_prefix (make install; scripts/test does)"
else
    {
        echo ". $init"
        echo "module use $modules"
        echo "module load har/$PACKAGE_VERSION || exit 1"
        echo 'echo "HAR_LIBRARY=$HAR_LIBRARY"'
        echo 'command -v har-info; command -v har-run'
        echo 'pkg-config --libs har'
        echo 'export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1'
        echo 'har-info'
        echo 'module unload har'
        echo 'echo "after unload: HAR_LIBRARY=${HAR_LIBRARY:-unset} har-info=$(command -v har-info || echo none)"'
    } > "$tmp/load.sh"
    env -u HAR_LIBRARY sh "$tmp/load.sh" > "$tmp/out" 2>&1
    rc=$?
    [ $rc = 0 ] && grep -q "^HAR_LIBRARY=$install_prefix/lib/libhar.so$" "$tmp/out" && [ -r "$install_prefix/lib/libhar.so" ] &&
        grep -q "^$install_prefix/bin/har-info$" "$tmp/out" && grep -q "^$install_prefix/bin/har-run$" "$tmp/out" &&
        grep -q -- "-L$install_prefix/lib -lhar" "$tmp/out" && grep -q "har $PACKAGE_VERSION" "$tmp/out" &&
        grep -q "^after unload: HAR_LIBRARY=unset har-info=none$" "$tmp/out"
    tap_result $? "module load har: har-info and har-run on PATH, pkg-config finds har, HAR_LIBRARY names libhar.so; unload undoes it" "$tmp/out"
fi
done_testing
