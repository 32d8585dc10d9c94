! MPI_IALLREDUCE, the persistent all-reduce and the completion calls from
! Fortran, linked with har: Open MPI's Fortran bindings call PMPI_*
! directly, so har's own Fortran spellings must take these calls, or a
! staged request would never get its results. Several all-reduces in
! flight (one MPI_IN_PLACE) beside a ring of ISEND/IRECV, completed each
! round by another call; then one persistent all-reduce started on new data
! each round; results checked against a reference; har's counters read
! through its C API. Argument: "staged" or "untouched" (what the counters
! must show), or "har" (a blocking MPI_ALLREDUCE first, then har itself
! serves every MPI_IALLREDUCE and every start of the persistent one:
! under HAR_ALGO=fake, the test build's engine), or "across" (the same
! across pretend nodes, where each is counted as progressed: har's
! blocking path, moved on by the completion calls).
! Preprocessed (-cpp): -DF08 builds it against `use mpi_f08` (some calls
! without their OPTIONAL ierror), else against mpif.h; -DALLREDUCE_INIT=
! names the persistent all-reduce (MPI_ALLREDUCE_INIT, or Open MPI 4.1's
! MPIX_ALLREDUCE_INIT, whose module or header -DMPI_EXT adds).
program frequests
    use iso_c_binding
#ifdef F08
    use mpi_f08
#ifdef MPI_EXT
    use mpi_f08_ext
#endif
#endif
    implicit none
#ifndef F08
    include 'mpif.h'
#ifdef MPI_EXT
    include 'mpif-ext.h'
#endif
#endif
    include 'har_counters.fi'
    integer, parameter :: n = 1000, nreq = 5, rounds = 9
    integer :: a(n), b(n), c(n), ring_in(10), ring_out(10)
    double precision :: d(n)
#ifdef F08
    type(MPI_Request) :: reqs(nreq), preq
    type(MPI_Status) :: statuses(nreq), status
#else
    integer :: reqs(nreq), statuses(MPI_STATUS_SIZE, nreq), status(MPI_STATUS_SIZE), preq
#endif
    integer :: ierr, rank, size, k, i, r, idx, outcount, indices(nreq), done, bad, posted
    logical :: flag, flags(nreq)
    integer(c_long_long) :: values(256)
    character(len=16) :: expect
    integer :: seen, staged, ncount, pseen, pstaged, by, one

    call get_command_argument(1, expect)
    call MPI_INIT(ierr)
    call MPI_COMM_RANK(MPI_COMM_WORLD, rank, ierr)
    call MPI_COMM_SIZE(MPI_COMM_WORLD, size, ierr)
    if (trim(expect) == 'har' .or. trim(expect) == 'across') then
        ! a blocking call sets har up on the communicator: har serves the
        ! MPI_IALLREDUCE calls itself after it
        one = 1
        call MPI_ALLREDUCE(MPI_IN_PLACE, one, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
        if (one /= size) print '(a,i0,a,i0)', 'FAIL rank ', rank, ': the set-up call gave ', one
    end if
    bad = 0
    posted = 0
    do k = 0, rounds - 1
        do i = 1, n
            a(i) = mod(i * 31 + rank * 17 + k, 97) - 48
            c(i) = mod(i * 7 + rank + k, 13)
            d(i) = dble(mod(i + rank * 3 + k, 29))
            b(i) = -12345
        end do
        ring_out = rank * 100 + k
        ring_in = -1
        call MPI_IRECV(ring_in, 10, MPI_INTEGER, mod(rank + size - 1, size), k, MPI_COMM_WORLD, reqs(1), ierr)
        call MPI_IALLREDUCE(a, b, n, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, reqs(2), ierr)
        call MPI_IALLREDUCE(MPI_IN_PLACE, d, n, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, reqs(3), ierr)
        call MPI_IALLREDUCE(MPI_IN_PLACE, c, n, MPI_INTEGER, MPI_MAX, MPI_COMM_WORLD, reqs(4), ierr)
        call MPI_ISEND(ring_out, 10, MPI_INTEGER, mod(rank + 1, size), k, MPI_COMM_WORLD, reqs(5), ierr)
        posted = posted + 3
        select case (mod(k, 9))
        case (0)
            do i = nreq, 1, -1
#ifdef F08
                call MPI_WAIT(reqs(i), status)
#else
                call MPI_WAIT(reqs(i), status, ierr)
#endif
            end do
        case (1)
            call MPI_WAITALL(nreq, reqs, statuses, ierr)
        case (2)
            call MPI_WAITALL(nreq, reqs, MPI_STATUSES_IGNORE, ierr)
        case (3)
            flag = .false.
            do while (.not. flag)
                call MPI_TESTALL(nreq, reqs, flag, statuses, ierr)
            end do
        ! (MPICH 4.0.2's mpif.h MPI_WAITANY and MPI_TESTANY return
        ! MPI_UNDEFINED + 1 where they mean MPI_UNDEFINED, and its mpi_f08
        ! ones count from 0: no index is negative, so every negative one is
        ! taken as MPI_UNDEFINED, and 0 as an index.)
        case (4)
            idx = 1
            do while (idx >= 0)
                call MPI_WAITANY(nreq, reqs, idx, status, ierr)
            end do
        case (5)
            do
                call MPI_TESTANY(nreq, reqs, idx, flag, MPI_STATUS_IGNORE, ierr)
                if (flag .and. idx < 0) exit
            end do
        case (6)
            outcount = 0
            do while (outcount /= MPI_UNDEFINED)
                call MPI_WAITSOME(nreq, reqs, outcount, indices, statuses, ierr)
            end do
        case (7)
            outcount = 0
            do while (outcount /= MPI_UNDEFINED)
                call MPI_TESTSOME(nreq, reqs, outcount, indices, MPI_STATUSES_IGNORE, ierr)
            end do
        case (8)
            flags = .false.
            done = 0
            do while (done < nreq)
                do i = 1, nreq
                    if (.not. flags(i)) then
                        call MPI_REQUEST_GET_STATUS(reqs(i), flags(i), status, ierr)
                        if (flags(i)) done = done + 1
                    end if
                end do
            end do
            do i = 1, nreq
                flag = .false.
                do while (.not. flag)
                    call MPI_TEST(reqs(i), flag, MPI_STATUS_IGNORE, ierr)
                end do
            end do
        end select
        do i = 1, nreq
            if (reqs(i) /= MPI_REQUEST_NULL) bad = bad + 1
        end do
        do i = 1, n
            if (b(i) /= sum([(mod(i * 31 + r * 17 + k, 97) - 48, r = 0, size - 1)])) bad = bad + 1
            if (d(i) /= sum([(dble(mod(i + r * 3 + k, 29)), r = 0, size - 1)])) bad = bad + 1
            if (c(i) /= maxval([(mod(i * 7 + r + k, 13), r = 0, size - 1)])) bad = bad + 1
        end do
        if (any(ring_in /= mod(rank + size - 1, size) * 100 + k)) bad = bad + 1
        if (bad > 0 .and. mod(k, 9) == k) print '(a,i0,a,i0,a,i0)', 'FAIL rank ', rank, ': round ', k, ': ', bad
    end do
    ! the persistent all-reduce: made once, started on new data each round
    call ALLREDUCE_INIT(a, b, n, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL, preq, ierr)
    do k = 0, 2
        do i = 1, n
            a(i) = mod(i * 5 + rank * 11 + k, 89) - 44
            b(i) = -12345
        end do
        call MPI_START(preq, ierr)
        if (k == 1) then
            flag = .false.
            do while (.not. flag)
                call MPI_TEST(preq, flag, status, ierr)
            end do
        else
            call MPI_WAIT(preq, MPI_STATUS_IGNORE, ierr)
        end if
        do i = 1, n
            if (b(i) /= sum([(mod(i * 5 + r * 11 + k, 89) - 44, r = 0, size - 1)])) bad = bad + 1
        end do
        if (bad > 0) print '(a,i0,a,i0,a,i0)', 'FAIL rank ', rank, ': persistent round ', k, ': ', bad
    end do
#ifdef F08
    call MPI_REQUEST_FREE(preq)
#else
    call MPI_REQUEST_FREE(preq, ierr)
#endif
    if (preq /= MPI_REQUEST_NULL) bad = bad + 1
    ncount = har_counters(values, 256)
    pseen = int(values(har_counter_index("allreduce_init" // c_null_char) + 1))
    pstaged = int(values(har_counter_index("allreduce_init_staged" // c_null_char) + 1))
    if (pseen /= 1 .or. (trim(expect) == 'staged' .and. pstaged /= 1) .or. &
        (trim(expect) == 'untouched' .and. pstaged /= 0)) then
        print '(a,i0,a,i0,a,i0)', 'FAIL rank ', rank, ': persistent all-reduce counted ', pseen, ', staged ', pstaged
        bad = bad + 1
    end if
    seen = int(values(har_counter_index("iallreduce" // c_null_char) + 1))
    staged = int(values(har_counter_index("iallreduce_staged" // c_null_char) + 1))
    if (seen /= posted) then
        print '(a,i0,a,i0,a,i0)', 'FAIL rank ', rank, ': har counted ', seen, ' MPI_IALLREDUCE of ', posted
        bad = bad + 1
    end if
    if (trim(expect) == 'har') then
        by = int(values(har_counter_index("fake" // c_null_char) + 1))
        ! the blocking call, the MPI_IALLREDUCE calls and 3 starts
        if (by /= posted + 1 + 3 .or. staged /= 0) then
            print '(a,i0,a,i0,a,i0,a,i0)', 'FAIL rank ', rank, ': expected har: ', by, ' calls by fake of ', &
                posted + 1 + 3, ', staged ', staged
            bad = bad + 1
        end if
    end if
    if (trim(expect) == 'across') then
        by = int(values(har_counter_index("progressed" // c_null_char) + 1))
        ! the MPI_IALLREDUCE calls and 3 starts
        if (by /= posted + 3 .or. staged /= 0) then
            print '(a,i0,a,i0,a,i0,a,i0)', 'FAIL rank ', rank, ': expected across: ', by, ' calls progressed of ', &
                posted + 3, ', staged ', staged
            bad = bad + 1
        end if
    end if
    if ((trim(expect) == 'staged' .and. staged /= posted) .or. (trim(expect) == 'untouched' .and. staged /= 0)) then
        print '(a,i0,a,a,a,i0,a,i0)', 'FAIL rank ', rank, ': expected ', trim(expect), ': ', staged, ' staged of ', posted
        bad = bad + 1
    end if
    print '(a,i0,a,l1,a,i0,a,i0)', 'frequests: rank ', rank, ': ok ', bad == 0, ', MPI_IALLREDUCE ', posted, &
        ', staged ', staged
    call MPI_FINALIZE(ierr)
    if (bad /= 0) stop 1
end program
