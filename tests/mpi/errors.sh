#!/bin/sh
# Bad arguments get what the MPI itself gives, through the error handler:
# the same error class with har as without (and where the MPI itself
# crashes on one, as Debian's MPICH does on a negative count, har does not
# turn that into something else). A null buffer in a call har serves is the
# exception: har catches it at the node's arrival (a rank whose buffer alone
# is null must not leave the others waiting), and gives MPI_ERR_BUFFER, as
# MPICH does, where Open MPI alone crashes.
. "$top_srcdir/tests/lib.sh"
for what in count datatype op comm op-type alias null-send null-recv; do
    $mpi 2 "$bin/mpi/bad_input" $what > "$tmp/plain" 2>&1
    plain_rc=$?
    env LD_PRELOAD="$top_builddir/.libs/libhar.so" $mpi 2 "$bin/mpi/bad_input" $what > "$tmp/har" 2>&1
    har_rc=$?
    grep '^bad_input' "$tmp/plain" | sort > "$tmp/a"; grep '^bad_input' "$tmp/har" | sort > "$tmp/b"
    # Same exit status (0, or both failing as the MPI fails), same line from every rank.
    [ $((plain_rc == 0)) = $((har_rc == 0)) ] && cmp -s "$tmp/a" "$tmp/b"
    rc=$?
    # A null buffer in a call har serves is har's to catch (the node agrees
    # on it): where the MPI alone crashes (Open MPI), every rank gets the
    # class MPICH gives, MPI_ERR_BUFFER (1 in both MPIs), instead.
    case $what in null-*)
        [ $rc != 0 ] && [ $plain_rc != 0 ] && [ $har_rc = 0 ] &&
            [ "$(grep -c "^bad_input: rank [01]: $what: error, class 1$" "$tmp/b")" = 2 ]
        [ $? = 0 ] && rc=0 && echo "bad_input: rank 0: $what: error, class 1 (the MPI alone crashed)" > "$tmp/a" ;;
    esac
    tap_result $rc "$what: same outcome with har as without, or MPI_ERR_BUFFER where the MPI crashes ($(head -1 "$tmp/a" | sed 's/^bad_input: rank 0: //'))" "$tmp/har"
done
done_testing
