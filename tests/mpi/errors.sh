#!/bin/sh
# Bad arguments get what the MPI itself gives, through the error handler:
# the same error class with har as without (and where the MPI itself
# crashes on one, as Debian's MPICH does on a negative count, har does not
# turn that into something else; Open MPI crashes on a null buffer with a
# count, MPICH returns MPI_ERR_BUFFER).
. "$top_srcdir/tests/lib.sh"
for what in count datatype op comm op-type alias null-send null-recv; do
    $mpi 2 "$bin/mpi/bad_input" $what > "$tmp/plain" 2>&1
    plain_rc=$?
    env LD_PRELOAD="$top_builddir/.libs/libhar.so" $mpi 2 "$bin/mpi/bad_input" $what > "$tmp/har" 2>&1
    har_rc=$?
    grep '^bad_input' "$tmp/plain" | sort > "$tmp/a"; grep '^bad_input' "$tmp/har" | sort > "$tmp/b"
    # Same exit status (0, or both failing as the MPI fails), same line from every rank.
    [ $((plain_rc == 0)) = $((har_rc == 0)) ] && cmp -s "$tmp/a" "$tmp/b"
    tap_result $? "$what: same outcome with har as without ($(head -1 "$tmp/a" | sed 's/^bad_input: rank 0: //'))" "$tmp/har"
done
done_testing
