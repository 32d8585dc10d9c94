#!/bin/sh
# The Fortran bindings reach har. tests/fortran/allreduce.F90, built with
# the MPI's own Fortran wrapper once per binding (mpif.h, use mpi, use
# mpi_f08), runs on 3 ranks without har, under LD_PRELOAD of libhar, with
# MPI_INIT_THREAD instead of MPI_INIT, and relinked with -lhar before the
# MPI's libraries: every result right, and on every rank har's counters
# (HAR_VERBOSE, printed in MPI_FINALIZE) show it saw every call and served
# all but the one on MPI_COMM_SELF, and that it started inside MPI_INIT (it
# counted the job's ranks there). A wrong reference makes the program fail.
# Then the symbols: libhar of an Open MPI build defines the Fortran entry
# points, each one the MPI's Fortran libraries define too; of an MPICH
# build only mpi_f08's MPI_Init, MPI_Init_thread and MPI_Finalize, the
# only ones of MPICH's that call PMPI_ (its all-reduces call the C
# MPI_Allreduce har wraps).
. "$top_srcdir/tests/lib.sh"
lib="$top_builddir/.libs/libhar.so"
np=3

# served OUT: the program's lines say 0 wrong on every rank, and every
# rank's counters say seen = its calls, mpi = its MPI_COMM_SELF calls, the
# rest on the host segment.
served() {
    n=$(grep -c '^allreduce_f: .*, 0 wrong$' "$1")
    [ "$n" = $np ] || { echo "expected $np ranks saying 0 wrong, got $n" >> "$1"; return 1; }
    calls=$(sed -n 's/^allreduce_f: .*: \([0-9]*\) calls (\([0-9]*\) on MPI_COMM_SELF).*/\1/p' "$1" | head -1)
    self=$(sed -n 's/^allreduce_f: .*: \([0-9]*\) calls (\([0-9]*\) on MPI_COMM_SELF).*/\2/p' "$1" | head -1)
    want="seen=$calls mpi=$self staged=0 host_segment=$((calls - self)) "
    n=$(grep 'calls per path:' "$1" | grep -c -- "$want")
    [ "$n" = $np ] || { echo "expected $np counter lines with '$want', got $n" >> "$1"; return 1; }
}

# started_in_init OUT: har started inside MPI_INIT on every rank (only
# there does it count the job's ranks on this machine).
started_in_init() {
    n=$(grep -c "$np ranks of the job on this machine" "$1")
    [ "$n" = $np ] || { echo "expected $np ranks saying har counted $np ranks at MPI_INIT, got $n" >> "$1"; return 1; }
}

for b in mpifh usempi f08; do
    prog="$bin/fortran/allreduce_$b"
    case " $FORTRAN_BINDINGS " in
    *" $b "*) ;;
    *)
        why="no Fortran wrapper for this MPI (configure's MPIFC)"
        [ -n "$MPIFC" ] && why="$MPIFC does not build the $b binding"
        for what in "without har" "LD_PRELOAD" "MPI_INIT_THREAD" "relinked" "a wrong reference fails"; do
            tap_skip "$b: $what" "$why"
        done
        continue ;;
    esac
    $mpi $np "$prog" > "$tmp/plain" 2>&1
    [ $? = 0 ] && [ "$(grep -c '^allreduce_f: .*, 0 wrong$' "$tmp/plain")" = $np ] && ! grep -q 'calls per path' "$tmp/plain"
    tap_result $? "$b: without har: every result right" "$tmp/plain"

    env HAR_VERBOSE=2 LD_PRELOAD="$lib" $mpi $np "$prog" > "$tmp/preload" 2>&1 &&
        served "$tmp/preload" && started_in_init "$tmp/preload"
    tap_result $? "$b: LD_PRELOAD=libhar.so: every result right, har served every call but MPI_COMM_SELF's, started in MPI_INIT" "$tmp/preload"
    grep -m1 'calls per path' "$tmp/preload" | sed 's/^/# /'

    env HAR_VERBOSE=2 LD_PRELOAD="$lib" $mpi $np "$prog" thread > "$tmp/thread" 2>&1 &&
        served "$tmp/thread" && started_in_init "$tmp/thread"
    tap_result $? "$b: MPI_INIT_THREAD, LD_PRELOAD: the same" "$tmp/thread"

    env HAR_VERBOSE=2 $mpi $np "${prog}_relinked" > "$tmp/relinked" 2>&1 &&
        served "$tmp/relinked" && started_in_init "$tmp/relinked"
    tap_result $? "$b: relinked with -lhar: every result right, har served every call but MPI_COMM_SELF's, started in MPI_INIT" "$tmp/relinked"

    env LD_PRELOAD="$lib" $mpi $np "$prog" wrong > "$tmp/wrong" 2>&1
    [ $? != 0 ] && grep -q '^allreduce_f: double sum count 1 rank 0 element 1: got' "$tmp/wrong"
    tap_result $? "$b: a wrong reference fails the program (its check can fail)" "$tmp/wrong"
done

# ---- the symbols ------------------------------------------------------------
defined() { nm -D --defined-only "$1" | awk '{print $NF}' | sort -u; }
# The MPI's Fortran libraries: what a Fortran program loads and a C one does not.
first=$(for b in f08 usempi mpifh; do case " $FORTRAN_BINDINGS " in *" $b "*) echo "$bin/fortran/allreduce_$b"; break ;; esac; done)
if [ -z "$first" ]; then
    tap_skip "libhar and the MPI's Fortran libraries" "no Fortran program was built"
    done_testing
    exit 0
fi
libs() { ldd "$1" | awk '$3 ~ /^\// {print $3}' | sort -u; }
for b in $FORTRAN_BINDINGS; do libs "$bin/fortran/allreduce_$b"; done | sort -u > "$tmp/flibs"
libs "$bin/mpi/plain_app" > "$tmp/clibs"
comm -23 "$tmp/flibs" "$tmp/clibs" | grep mpi > "$tmp/mpif"
for l in $(cat "$tmp/mpif"); do defined "$l"; done | sort -u > "$tmp/mpif_syms"
defined "$lib" > "$tmp/har_syms"
comm -12 "$tmp/har_syms" "$tmp/mpif_syms" > "$tmp/common"
{ echo "the MPI's Fortran libraries:"; cat "$tmp/mpif"; echo "defined by both libhar and them:"; cat "$tmp/common"; } > "$tmp/syms"
# What libhar must define of them. Open MPI's Fortran bindings call
# PMPI_* themselves, so every C entry point of libhar (MPI_Bcast, ...) needs
# its Fortran spellings too: libhar must define exactly those spellings of
# its C entry points that the MPI's Fortran libraries define (C and Fortran
# coverage equal). MPICH's Fortran calls reach the C entry points, but for
# mpi_f08's start, teardown, MPI_Comm_free, MPI_Comm_disconnect and completion calls (mpi_wrappers/fortran.c,
# fortran_requests.c).
completion="iallreduce wait test waitall testall waitany testany waitsome testsome request_get_status request_free
    start startall"
case "$MPI_FLAVOUR" in
openmpi)
    grep -E '^MPIX?_[A-Z][a-z0-9_]*$' "$tmp/har_syms" | grep -v '_c$' > "$tmp/c_entries"
    while read -r c; do
        l=$(echo "$c" | tr A-Z a-z) u=$(echo "$c" | tr a-z A-Z)
        for f in "$l" "${l}_" "${l}__" "$u" "${l}_f08_"; do grep -qx -- "$f" "$tmp/mpif_syms" && echo "$f"; done
    done < "$tmp/c_entries" | sort > "$tmp/want"
    n=$(wc -l < "$tmp/c_entries")
    what="Open MPI: libhar defines exactly the Fortran spellings of its $n C entry points that the MPI's Fortran libraries define (every collective, the all-reduce's forms, MPI_INIT, MPI_FINALIZE, the completion calls)"
    # The derived list holds, among others, these (the check can fail).
    for r in allreduce bcast ialltoallv init finalize comm_free comm_disconnect wait startall; do
        grep -qx "mpi_${r}_f08_" "$tmp/want" || echo "mpi_${r}_f08_ is not among the wanted symbols"
    done > "$tmp/short"
    ours=yes ;;
mpich)
    { printf '%s\n' mpi_comm_free_f08_ mpi_comm_disconnect_f08_ mpi_finalize_f08_ mpi_init_f08_ mpi_init_thread_f08_;
      for r in $completion; do [ $r = iallreduce ] || echo "mpi_${r}_f08_"; done; } | sort > "$tmp/want"
    what="MPICH: of the MPI's Fortran symbols libhar defines only mpi_f08's MPI_Init, MPI_Init_thread, MPI_Finalize, MPI_Comm_free, MPI_Comm_disconnect and completion calls (which call PMPI_ directly), no all-reduce"
    ours=no ;;
*)
    : > "$tmp/want"
    what="$MPI_FLAVOUR: libhar defines no symbol of the MPI's Fortran libraries"
    ours=no ;;
esac
{ echo "wanted:"; cat "$tmp/want"; cat "$tmp/short" 2>/dev/null; } >> "$tmp/syms"
[ -s "$tmp/mpif" ] && cmp -s "$tmp/want" "$tmp/common" && [ ! -s "$tmp/short" ]
tap_result $? "$what" "$tmp/syms"
for b in $FORTRAN_BINDINGS; do
    nm "$bin/fortran/allreduce_$b" | awk '$1 == "U" && /allreduce/ {print $2}' > "$tmp/calls"
    if [ $ours = yes ]; then
        [ -s "$tmp/calls" ] && grep -q -x -F -f "$tmp/calls" "$tmp/har_syms"
        tap_result $? "$b programs call $(tr '\n' ' ' < "$tmp/calls")which libhar defines" "$tmp/calls"
    else
        [ -s "$tmp/calls" ] && ! grep -q -x -F -f "$tmp/calls" "$tmp/har_syms"
        tap_result $? "$b programs call $(tr '\n' ' ' < "$tmp/calls")(the MPI's own, which calls the C MPI_Allreduce har wraps)" "$tmp/calls"
    fi
done
done_testing
