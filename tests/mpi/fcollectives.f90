! The collectives other than the all-reduce from Fortran, linked with har:
! MPI_BCAST, MPI_REDUCE, MPI_ALLGATHER(V), MPI_REDUCE_SCATTER(_BLOCK),
! MPI_GATHER(V), MPI_SCATTER(V), MPI_ALLTOALL(V), each blocking and
! non-blocking (completed by MPI_WAIT), with MPI_IN_PLACE where the
! standard allows it (a reduce's root, an all-gather, a scatter's root's
! receive buffer), roots other than 0, and blocks of different sizes per
! rank in the v forms. Open MPI's Fortran bindings call PMPI_* directly, so
! har sees these calls only through its own Fortran spellings
! (mpi_wrappers/collectives.c); MPICH's call the C entry points. Every
! element of every result is checked against what every rank sent; har's
! counters (read through its C API) must show every call of every kind,
! and as many of them staged as the argument says: "staged" (every one:
! the test build under HAR_TEST_STAGE=1) or "untouched" (none).
! Preprocessed (-cpp): -DF08 builds it against `use mpi_f08`, else mpif.h.
program fcollectives
    use iso_c_binding
#ifdef F08
    use mpi_f08
#endif
    implicit none
#ifndef F08
    include 'mpif.h'
#endif
    include 'har_counters.fi'
    integer, parameter :: m = 5, maxp = 16, big = maxp * maxp * m
    integer :: sbuf(big), rbuf(big), want(big), counts(maxp), displs(maxp), rcounts(maxp), rdispls(maxp)
#ifdef F08
    type(MPI_Request) :: req
#else
    integer :: req
#endif
    integer :: ierr, rank, p, nb, root, i, k, j, total, bad, ncount, seen, staged
    integer(c_long_long) :: values(512)
    character(len=16) :: expect
    character(len=24) :: kinds(24)
    character(len=16), parameter :: form(0:1) = [character(len=16) :: ' (blocking)', ' (non-blocking)']
    integer :: calls(24)

    call get_command_argument(1, expect)
    call MPI_INIT(ierr)
    call MPI_COMM_RANK(MPI_COMM_WORLD, rank, ierr)
    call MPI_COMM_SIZE(MPI_COMM_WORLD, p, ierr)
    if (p > maxp) call MPI_ABORT(MPI_COMM_WORLD, 2, ierr)
    bad = 0
    calls = 0
    kinds = [character(len=24) :: 'bcast', 'ibcast', 'reduce', 'ireduce', 'allgather', 'iallgather', &
             'allgatherv', 'iallgatherv', 'reduce_scatter_block', 'ireduce_scatter_block', 'reduce_scatter', &
             'ireduce_scatter', 'gather', 'igather', 'gatherv', 'igatherv', 'scatter', 'iscatter', 'scatterv', &
             'iscatterv', 'alltoall', 'ialltoall', 'alltoallv', 'ialltoallv']

    do nb = 0, 1
        ! MPI_BCAST from the last rank
        root = p - 1
        sbuf = -1
        if (rank == root) sbuf(1:m) = [(v(root, i), i = 1, m)]
        if (nb == 0) then
            call MPI_BCAST(sbuf, m, MPI_INTEGER, root, MPI_COMM_WORLD, ierr)
        else
            call MPI_IBCAST(sbuf, m, MPI_INTEGER, root, MPI_COMM_WORLD, req, ierr)
            call MPI_WAIT(req, MPI_STATUS_IGNORE, ierr)
        end if
        call note(1 + nb)
        call expect_eq('bcast', sbuf, [(v(root, i), i = 1, m)], m)

        ! MPI_REDUCE to rank 1 (mod p), then in place at the root
        root = mod(1, p)
        sbuf(1:m) = [(v(rank, i), i = 1, m)]
        rbuf = -1
        want(1:m) = [(sum([(v(k, i), k = 0, p - 1)]), i = 1, m)]
        if (nb == 0) then
            call MPI_REDUCE(sbuf, rbuf, m, MPI_INTEGER, MPI_SUM, root, MPI_COMM_WORLD, ierr)
        else
            call MPI_IREDUCE(sbuf, rbuf, m, MPI_INTEGER, MPI_SUM, root, MPI_COMM_WORLD, req, ierr)
            call MPI_WAIT(req, MPI_STATUS_IGNORE, ierr)
        end if
        call note(3 + nb)
        if (rank == root) call expect_eq('reduce', rbuf, want, m)
        if (nb == 0) then
            rbuf(1:m) = sbuf(1:m)
            if (rank == root) then
                call MPI_REDUCE(MPI_IN_PLACE, rbuf, m, MPI_INTEGER, MPI_SUM, root, MPI_COMM_WORLD, ierr)
                call expect_eq('reduce in place', rbuf, want, m)
            else
                call MPI_REDUCE(sbuf, rbuf, m, MPI_INTEGER, MPI_SUM, root, MPI_COMM_WORLD, ierr)
            end if
            call note(3)
        end if

        ! MPI_ALLGATHER, then in place
        sbuf(1:m) = [(v(rank, i), i = 1, m)]
        rbuf = -1
        want(1:p * m) = [((v(k, i), i = 1, m), k = 0, p - 1)]
        if (nb == 0) then
            call MPI_ALLGATHER(sbuf, m, MPI_INTEGER, rbuf, m, MPI_INTEGER, MPI_COMM_WORLD, ierr)
        else
            call MPI_IALLGATHER(sbuf, m, MPI_INTEGER, rbuf, m, MPI_INTEGER, MPI_COMM_WORLD, req, ierr)
            call MPI_WAIT(req, MPI_STATUS_IGNORE, ierr)
        end if
        call note(5 + nb)
        call expect_eq('allgather', rbuf, want, p * m)
        if (nb == 0) then
            rbuf = -1
            rbuf(rank * m + 1:rank * m + m) = sbuf(1:m)
            call MPI_ALLGATHER(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, rbuf, m, MPI_INTEGER, MPI_COMM_WORLD, ierr)
            call note(5)
            call expect_eq('allgather in place', rbuf, want, p * m)
        end if

        ! MPI_ALLGATHERV: rank k gives k + 1 elements
        call blocks(counts, displs, total)
        sbuf(1:rank + 1) = [(v(rank, i), i = 1, rank + 1)]
        rbuf = -1
        want(1:total) = [((v(k, i), i = 1, k + 1), k = 0, p - 1)]
        if (nb == 0) then
            call MPI_ALLGATHERV(sbuf, rank + 1, MPI_INTEGER, rbuf, counts, displs, MPI_INTEGER, MPI_COMM_WORLD, ierr)
        else
            call MPI_IALLGATHERV(sbuf, rank + 1, MPI_INTEGER, rbuf, counts, displs, MPI_INTEGER, MPI_COMM_WORLD, &
                                 req, ierr)
            call MPI_WAIT(req, MPI_STATUS_IGNORE, ierr)
        end if
        call note(7 + nb)
        call expect_eq('allgatherv', rbuf, want, total)

        ! MPI_REDUCE_SCATTER_BLOCK: m elements each
        sbuf(1:p * m) = [(v(rank, j), j = 1, p * m)]
        rbuf = -1
        want(1:m) = [(sum([(v(k, rank * m + i), k = 0, p - 1)]), i = 1, m)]
        if (nb == 0) then
            call MPI_REDUCE_SCATTER_BLOCK(sbuf, rbuf, m, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
        else
            call MPI_IREDUCE_SCATTER_BLOCK(sbuf, rbuf, m, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, req, ierr)
            call MPI_WAIT(req, MPI_STATUS_IGNORE, ierr)
        end if
        call note(9 + nb)
        call expect_eq('reduce_scatter_block', rbuf, want, m)

        ! MPI_REDUCE_SCATTER: rank k gets k + 1 elements
        call blocks(counts, displs, total)
        sbuf(1:total) = [(v(rank, j), j = 1, total)]
        rbuf = -1
        want(1:rank + 1) = [(sum([(v(k, displs(rank + 1) + i), k = 0, p - 1)]), i = 1, rank + 1)]
        if (nb == 0) then
            call MPI_REDUCE_SCATTER(sbuf, rbuf, counts, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
        else
            call MPI_IREDUCE_SCATTER(sbuf, rbuf, counts, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, req, ierr)
            call MPI_WAIT(req, MPI_STATUS_IGNORE, ierr)
        end if
        call note(11 + nb)
        call expect_eq('reduce_scatter', rbuf, want, rank + 1)

        ! MPI_GATHER to the last rank
        root = p - 1
        sbuf(1:m) = [(v(rank, i), i = 1, m)]
        rbuf = -1
        want(1:p * m) = [((v(k, i), i = 1, m), k = 0, p - 1)]
        if (nb == 0) then
            call MPI_GATHER(sbuf, m, MPI_INTEGER, rbuf, m, MPI_INTEGER, root, MPI_COMM_WORLD, ierr)
        else
            call MPI_IGATHER(sbuf, m, MPI_INTEGER, rbuf, m, MPI_INTEGER, root, MPI_COMM_WORLD, req, ierr)
            call MPI_WAIT(req, MPI_STATUS_IGNORE, ierr)
        end if
        call note(13 + nb)
        if (rank == root) call expect_eq('gather', rbuf, want, p * m)

        ! MPI_GATHERV to rank 0: rank k gives k + 1 elements
        root = 0
        call blocks(counts, displs, total)
        sbuf(1:rank + 1) = [(v(rank, i), i = 1, rank + 1)]
        rbuf = -1
        want(1:total) = [((v(k, i), i = 1, k + 1), k = 0, p - 1)]
        if (nb == 0) then
            call MPI_GATHERV(sbuf, rank + 1, MPI_INTEGER, rbuf, counts, displs, MPI_INTEGER, root, MPI_COMM_WORLD, ierr)
        else
            call MPI_IGATHERV(sbuf, rank + 1, MPI_INTEGER, rbuf, counts, displs, MPI_INTEGER, root, MPI_COMM_WORLD, &
                              req, ierr)
            call MPI_WAIT(req, MPI_STATUS_IGNORE, ierr)
        end if
        call note(15 + nb)
        if (rank == root) call expect_eq('gatherv', rbuf, want, total)

        ! MPI_SCATTER from rank 0, then in place at the root
        root = 0
        sbuf(1:p * m) = [(v(root, j), j = 1, p * m)]
        rbuf = -1
        want(1:m) = [(v(root, rank * m + i), i = 1, m)]
        if (nb == 0) then
            call MPI_SCATTER(sbuf, m, MPI_INTEGER, rbuf, m, MPI_INTEGER, root, MPI_COMM_WORLD, ierr)
        else
            call MPI_ISCATTER(sbuf, m, MPI_INTEGER, rbuf, m, MPI_INTEGER, root, MPI_COMM_WORLD, req, ierr)
            call MPI_WAIT(req, MPI_STATUS_IGNORE, ierr)
        end if
        call note(17 + nb)
        call expect_eq('scatter', rbuf, want, m)
        if (nb == 0) then
            rbuf = -1
            if (rank == root) then
                call MPI_SCATTER(sbuf, m, MPI_INTEGER, MPI_IN_PLACE, m, MPI_INTEGER, root, MPI_COMM_WORLD, ierr)
                call expect_eq('scatter in place (the root keeps its data)', sbuf, [(v(root, j), j = 1, p * m)], &
                               p * m)
            else
                call MPI_SCATTER(sbuf, m, MPI_INTEGER, rbuf, m, MPI_INTEGER, root, MPI_COMM_WORLD, ierr)
                call expect_eq('scatter beside an in-place root', rbuf, want, m)
            end if
            call note(17)
        end if

        ! MPI_SCATTERV from rank 1 (mod p): rank k gets k + 1 elements
        root = mod(1, p)
        call blocks(counts, displs, total)
        sbuf(1:total) = [(v(root, j), j = 1, total)]
        rbuf = -1
        want(1:rank + 1) = [(v(root, displs(rank + 1) + i), i = 1, rank + 1)]
        if (nb == 0) then
            call MPI_SCATTERV(sbuf, counts, displs, MPI_INTEGER, rbuf, rank + 1, MPI_INTEGER, root, MPI_COMM_WORLD, ierr)
        else
            call MPI_ISCATTERV(sbuf, counts, displs, MPI_INTEGER, rbuf, rank + 1, MPI_INTEGER, root, MPI_COMM_WORLD, &
                               req, ierr)
            call MPI_WAIT(req, MPI_STATUS_IGNORE, ierr)
        end if
        call note(19 + nb)
        call expect_eq('scatterv', rbuf, want, rank + 1)

        ! MPI_ALLTOALL: block k of rank r goes to rank k
        sbuf(1:p * m) = [(v(rank, j), j = 1, p * m)]
        rbuf = -1
        want(1:p * m) = [((v(k, rank * m + i), i = 1, m), k = 0, p - 1)]
        if (nb == 0) then
            call MPI_ALLTOALL(sbuf, m, MPI_INTEGER, rbuf, m, MPI_INTEGER, MPI_COMM_WORLD, ierr)
        else
            call MPI_IALLTOALL(sbuf, m, MPI_INTEGER, rbuf, m, MPI_INTEGER, MPI_COMM_WORLD, req, ierr)
            call MPI_WAIT(req, MPI_STATUS_IGNORE, ierr)
        end if
        call note(21 + nb)
        call expect_eq('alltoall', rbuf, want, p * m)

        ! MPI_ALLTOALLV: rank r sends r + 1 elements to every rank
        do k = 0, p - 1
            counts(k + 1) = rank + 1
            displs(k + 1) = k * (rank + 1)
            rcounts(k + 1) = k + 1
        end do
        call blocks(rcounts, rdispls, total)
        sbuf(1:p * (rank + 1)) = [(v(rank, j), j = 1, p * (rank + 1))]
        rbuf = -1
        want(1:total) = [((v(k, rank * (k + 1) + i), i = 1, k + 1), k = 0, p - 1)]
        if (nb == 0) then
            call MPI_ALLTOALLV(sbuf, counts, displs, MPI_INTEGER, rbuf, rcounts, rdispls, MPI_INTEGER, &
                               MPI_COMM_WORLD, ierr)
        else
            call MPI_IALLTOALLV(sbuf, counts, displs, MPI_INTEGER, rbuf, rcounts, rdispls, MPI_INTEGER, &
                                MPI_COMM_WORLD, req, ierr)
            call MPI_WAIT(req, MPI_STATUS_IGNORE, ierr)
        end if
        call note(23 + nb)
        call expect_eq('alltoallv', rbuf, want, total)
    end do

    ! har's counters: every call of every kind, and staged as expected
    ncount = har_counters(values, 512)
    do k = 1, 24
        seen = int(values(har_counter_index(trim(kinds(k)) // c_null_char) + 1))
        staged = int(values(har_counter_index(trim(kinds(k)) // '_staged' // c_null_char) + 1))
        if (seen /= calls(k) .or. (trim(expect) == 'staged' .and. staged /= calls(k)) .or. &
            (trim(expect) == 'untouched' .and. staged /= 0)) then
            print '(a,i0,a,a,a,i0,a,i0,a,i0,a,a)', 'FAIL rank ', rank, ': ', trim(kinds(k)), ' counted ', seen, &
                ', staged ', staged, ' of ', calls(k), ' calls, expected ', trim(expect)
            bad = bad + 1
        end if
    end do
    print '(a,i0,a,i0,a,i0,a,a)', 'fcollectives: rank ', rank, ': ', sum(calls), ' calls, ', bad, &
        ' wrong, counters say ', trim(expect)
    call MPI_FINALIZE(ierr)
    if (bad > 0) stop 1

contains

    ! The value rank r sends as its element i.
    integer function v(r, i)
        integer, intent(in) :: r, i
        v = r * 1000 + i
    end function

    ! Blocks of k + 1 elements for rank k, packed: counts, displacements, total.
    subroutine blocks(c, d, t)
        integer, intent(out) :: c(:), d(:), t
        integer :: q
        t = 0
        do q = 0, p - 1
            c(q + 1) = q + 1
            d(q + 1) = t
            t = t + q + 1
        end do
    end subroutine

    subroutine note(kind)
        integer, intent(in) :: kind
        calls(kind) = calls(kind) + 1
        if (ierr /= MPI_SUCCESS) then
            print '(a,i0,a,a,a,i0)', 'FAIL rank ', rank, ': ', trim(kinds(kind)), ' returned ', ierr
            bad = bad + 1
        end if
    end subroutine

    subroutine expect_eq(what, got, ref, n)
        character(len=*), intent(in) :: what
        integer, intent(in) :: got(:), ref(:), n
        integer :: q
        do q = 1, n
            if (got(q) /= ref(q)) then
                print '(a,i0,a,a,a,a,i0,a,i0,a,i0)', 'FAIL rank ', rank, ': ', what, trim(form(nb)), ' element ', q, &
                    ': got ', got(q), ', want ', ref(q)
                bad = bad + 1
                return
            end if
        end do
    end subroutine
end program
