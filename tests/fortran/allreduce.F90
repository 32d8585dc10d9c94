! MPI_ALLREDUCE through one Fortran binding, chosen when it is compiled:
! -DHAR_F_MPIFH (include 'mpif.h'), -DHAR_F_USEMPI (use mpi) or -DHAR_F_F08
! (use mpi_f08). A plain MPI program that knows nothing of har.
!
! DOUBLE PRECISION (MPI_SUM) and INTEGER (MPI_SUM, MPI_MAX) arrays of odd
! sizes, the largest over 1 MiB, and LOGICAL (MPI_LAND, MPI_LOR), in place
! (MPI_IN_PLACE) and not, on MPI_COMM_WORLD and a duplicate; every element
! of every result checked against a reference computed here from every
! rank's inputs, the send buffer checked unchanged, ierror checked (with
! mpi_f08 some calls leave ierror out). Values are small integers and
! halves, so every sum is exact in any order. One last call on
! MPI_COMM_SELF, which har leaves to the MPI.
!
! Prints on every rank "allreduce_f: BINDING: rank R: N calls (M on
! MPI_COMM_SELF), E wrong" and exits 1 when E > 0. Arguments: "thread"
! starts with MPI_INIT_THREAD instead of MPI_INIT (with mpi_f08, MPI_Init
! and MPI_Finalize are called without ierror); "wrong" puts the reference
! off by one at one element of each array, so the check must fail (the
! test proves it can).
program allreduce_f
#if defined(HAR_F_F08)
  use mpi_f08
#elif defined(HAR_F_USEMPI)
  use mpi
#endif
  implicit none
#if defined(HAR_F_MPIFH)
  include 'mpif.h'
#endif
#if defined(HAR_F_F08)
#define COMM_T type(MPI_Comm)
  character(len=*), parameter :: binding = 'use mpi_f08'
#elif defined(HAR_F_USEMPI)
#define COMM_T integer
  character(len=*), parameter :: binding = 'use mpi'
#else
#define COMM_T integer
  character(len=*), parameter :: binding = 'mpif.h'
#endif
  integer, parameter :: counts(5) = (/ 1, 7, 1001, 65537, 300007 /)
  COMM_T :: comms(2)
  integer :: rank, nranks, ierr, c, k, calls, self_calls, bad, provided
  logical :: wrong, thread
  character(len=16) :: arg

  rank = -1
  calls = 0
  self_calls = 0
  bad = 0
  wrong = .false.
  thread = .false.
  do k = 1, command_argument_count()
    call get_command_argument(k, arg)
    if (arg == 'wrong') wrong = .true.
    if (arg == 'thread') thread = .true.
  end do

  ierr = MPI_SUCCESS
  if (thread) then
    provided = -1
    call MPI_INIT_THREAD(MPI_THREAD_FUNNELED, provided, ierr)
    if (provided < MPI_THREAD_SINGLE) call report('MPI_INIT_THREAD provided', 0, 0, 'nothing', 'a thread level')
  else
#if defined(HAR_F_F08)
    call MPI_Init()  ! no ierror
#else
    call MPI_INIT(ierr)
#endif
  end if
  call check_ierror('MPI_INIT', ierr)
  call MPI_COMM_RANK(MPI_COMM_WORLD, rank, ierr)
  call MPI_COMM_SIZE(MPI_COMM_WORLD, nranks, ierr)
  comms(1) = MPI_COMM_WORLD
  call MPI_COMM_DUP(MPI_COMM_WORLD, comms(2), ierr)

  do c = 1, 2
    do k = 1, size(counts)
      call check_double(comms(c), counts(k), .false.)
      call check_double(comms(c), counts(k), .true.)
      call check_integer(comms(c), counts(k), .false., .true.)
      call check_integer(comms(c), counts(k), .true., .false.)
    end do
    call check_logical(comms(c), 1001, .false.)
    call check_logical(comms(c), 1001, .true.)
  end do
  call check_self()

  call MPI_COMM_FREE(comms(2), ierr)  ! har's under Open MPI, and its mpi_f08 spelling under MPICH
  call check_ierror('MPI_COMM_FREE', ierr)
  if (comms(2) /= MPI_COMM_NULL) call report('MPI_COMM_FREE handle', 0, 0, 'not MPI_COMM_NULL', 'MPI_COMM_NULL')
  call MPI_COMM_DUP(MPI_COMM_WORLD, comms(2), ierr)
  call check_double(comms(2), 1001, .false.)
  call MPI_COMM_DISCONNECT(comms(2), ierr)  ! the same spellings as MPI_COMM_FREE
  call check_ierror('MPI_COMM_DISCONNECT', ierr)
  if (comms(2) /= MPI_COMM_NULL) call report('MPI_COMM_DISCONNECT handle', 0, 0, 'not MPI_COMM_NULL', 'MPI_COMM_NULL')
  write (*, '(a, a, a, i0, a, i0, a, i0, a, i0, a)') 'allreduce_f: ', binding, ': rank ', rank, ': ', calls, &
    ' calls (', self_calls, ' on MPI_COMM_SELF), ', bad, ' wrong'
#if defined(HAR_F_F08)
  call MPI_Finalize()  ! no ierror
#else
  call MPI_FINALIZE(ierr)
#endif
  if (bad > 0) stop 1

contains

  double precision function dvalue(r, i)
    integer, intent(in) :: r, i
    dvalue = dble(mod(i * 7 + r * 13, 201) - 100) * 0.5d0
  end function

  integer function ivalue(r, i)
    integer, intent(in) :: r, i
    ivalue = mod(i * 31 + r * 1009, 2000001) - 1000000
  end function

  logical function lvalue(r, i)
    integer, intent(in) :: r, i
    lvalue = mod(i + r, 3) /= 0
  end function

  ! One wrong element, said with what the call was (the first few only).
  subroutine report(what, n, i, got, want)
    character(len=*), intent(in) :: what
    integer, intent(in) :: n, i
    character(len=*), intent(in) :: got, want
    bad = bad + 1
    if (bad <= 5) write (*, '(a, a, a, i0, a, i0, a, i0, a, a, a, a)') 'allreduce_f: ', what, ' count ', n, &
      ' rank ', rank, ' element ', i, ': got ', trim(got), ', want ', trim(want)
  end subroutine

  subroutine check_ierror(what, e)
    character(len=*), intent(in) :: what
    integer, intent(in) :: e
    if (e /= MPI_SUCCESS) call report(what // ' ierror', 0, 0, 'not MPI_SUCCESS', 'MPI_SUCCESS')
  end subroutine

  subroutine check_double(comm, n, inplace)
    COMM_T, intent(in) :: comm
    integer, intent(in) :: n
    logical, intent(in) :: inplace
    double precision, allocatable :: x(:), y(:)
    double precision :: want
    character(len=32) :: g, w
    integer :: i, r, e
    allocate (x(n), y(n))
    do i = 1, n
      x(i) = dvalue(rank, i)
    end do
    e = -1
    if (inplace) then
#if defined(HAR_F_F08)
      call MPI_Allreduce(MPI_IN_PLACE, x, n, MPI_DOUBLE_PRECISION, MPI_SUM, comm)  ! no ierror
      e = MPI_SUCCESS
#else
      call MPI_ALLREDUCE(MPI_IN_PLACE, x, n, MPI_DOUBLE_PRECISION, MPI_SUM, comm, e)
#endif
      y = x
    else
      y = -12345d0
      call MPI_ALLREDUCE(x, y, n, MPI_DOUBLE_PRECISION, MPI_SUM, comm, e)
    end if
    calls = calls + 1
    call check_ierror('double sum', e)
    do i = 1, n
      want = 0
      do r = 0, nranks - 1
        want = want + dvalue(r, i)
      end do
      if (wrong .and. i == n) want = want + 1
      if (y(i) /= want) then
        write (g, '(f0.1)') y(i)
        write (w, '(f0.1)') want
        call report('double sum', n, i, g, w)
      end if
      if (.not. inplace .and. x(i) /= dvalue(rank, i)) call report('double sum (send buffer)', n, i, 'changed', 'as sent')
    end do
    deallocate (x, y)
  end subroutine

  subroutine check_integer(comm, n, inplace, is_sum)
    COMM_T, intent(in) :: comm
    integer, intent(in) :: n
    logical, intent(in) :: inplace, is_sum
    integer, allocatable :: x(:), y(:)
    integer :: i, r, e, want
    character(len=32) :: g, w
    allocate (x(n), y(n))
    do i = 1, n
      x(i) = ivalue(rank, i)
    end do
    e = -1
    if (inplace .and. is_sum) call MPI_ALLREDUCE(MPI_IN_PLACE, x, n, MPI_INTEGER, MPI_SUM, comm, e)
    if (inplace .and. .not. is_sum) call MPI_ALLREDUCE(MPI_IN_PLACE, x, n, MPI_INTEGER, MPI_MAX, comm, e)
    if (inplace) y = x
    if (.not. inplace) y = -12345
    if (.not. inplace .and. is_sum) call MPI_ALLREDUCE(x, y, n, MPI_INTEGER, MPI_SUM, comm, e)
    if (.not. inplace .and. .not. is_sum) call MPI_ALLREDUCE(x, y, n, MPI_INTEGER, MPI_MAX, comm, e)
    calls = calls + 1
    call check_ierror('integer', e)
    do i = 1, n
      want = ivalue(0, i)
      do r = 1, nranks - 1
        if (is_sum) want = want + ivalue(r, i)
        if (.not. is_sum) want = max(want, ivalue(r, i))
      end do
      if (wrong .and. i == n) want = want + 1
      if (y(i) /= want) then
        write (g, '(i0)') y(i)
        write (w, '(i0)') want
        call report('integer', n, i, g, w)
      end if
      if (.not. inplace .and. x(i) /= ivalue(rank, i)) call report('integer (send buffer)', n, i, 'changed', 'as sent')
    end do
    deallocate (x, y)
  end subroutine

  ! LAND not in place, LOR in place.
  subroutine check_logical(comm, n, inplace)
    COMM_T, intent(in) :: comm
    integer, intent(in) :: n
    logical, intent(in) :: inplace
    logical, allocatable :: x(:), y(:)
    logical :: want
    integer :: i, r, e
    allocate (x(n), y(n))
    do i = 1, n
      x(i) = lvalue(rank, i)
    end do
    e = -1
    if (inplace) then
      call MPI_ALLREDUCE(MPI_IN_PLACE, x, n, MPI_LOGICAL, MPI_LOR, comm, e)
      y = x
    else
      y = .not. x
      call MPI_ALLREDUCE(x, y, n, MPI_LOGICAL, MPI_LAND, comm, e)
    end if
    calls = calls + 1
    call check_ierror('logical', e)
    do i = 1, n
      want = .not. inplace
      do r = 0, nranks - 1
        if (inplace) want = want .or. lvalue(r, i)
        if (.not. inplace) want = want .and. lvalue(r, i)
      end do
      if (wrong .and. i == n) want = .not. want
      if (y(i) .neqv. want) call report('logical', n, i, merge('T', 'F', y(i)), merge('T', 'F', want))
    end do
    deallocate (x, y)
  end subroutine

  ! A communicator of one rank: the MPI's, not har's.
  subroutine check_self()
    integer :: x(5), y(5), e, i
    do i = 1, 5
      x(i) = ivalue(rank, i)
    end do
    y = 0
    call MPI_ALLREDUCE(x, y, 5, MPI_INTEGER, MPI_SUM, MPI_COMM_SELF, e)
    calls = calls + 1
    self_calls = self_calls + 1
    call check_ierror('MPI_COMM_SELF', e)
    do i = 1, 5
      if (y(i) /= x(i)) call report('MPI_COMM_SELF', 5, i, 'other', 'its own input')
    end do
  end subroutine

end program
