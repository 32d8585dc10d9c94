#!/bin/sh
# The correctness matrix across hosts made of namespaces (scripts/hosts-run):
# the MPI itself sees several nodes, so har splits by host without
# HAR_NODE_SIZE and its ring crosses the hosts' links. 2 hosts of 2 ranks
# (rails), hosts of 1, 2 and 3 ranks (leader mode), 4 hosts of 1; full where
# it is quick, seeded samples elsewhere; an unmodified program under
# LD_PRELOAD; a short soak over several seeds; and the same across hosts
# over a shared network (--shared-net) with ip and tc out of reach.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/hosts/hosts.sh"
prog="$bin/mpi/check_allreduce"
counts=0,1,7,63,64,1000,65537,300001
seed=$(test_seed)
echo "# seed $seed (HAR_TEST_SEED=$seed repeats the sampled runs)"

# har finds as many nodes as hosts, by the MPI's own split (HAR_VERBOSE=2
# logs each rank's node), and names the hosts.
nodes() {
    env HAR_VERBOSE=2 $hosts 2 2 -- "$prog" --counts 7 --types int --ops sum --comms 1 --no-mpi-cases \
        --expect rails,doubling > "$tmp/a" 2>&1 &&
        env HAR_VERBOSE=2 $hosts --ranks 1,2,3 -- "$prog" --counts 7 --types int --ops sum --comms 1 --no-mpi-cases \
        --expect leader,doubling > "$tmp/b" 2>&1
    s=$?
    cat "$tmp/a" "$tmp/b"
    [ $s = 0 ] && [ "$(grep -c "communicator of 4 ranks: node [01] of 2," "$tmp/a")" = 4 ] &&
        [ "$(grep -c "communicator of 6 ranks: node [0-2] of 3," "$tmp/b")" = 6 ] &&
        grep -q "^har\[3 h2\]" "$tmp/a" && grep -q "^har\[5 h3\]" "$tmp/b"
}
hcheck "har finds 2 nodes on 2 hosts of 2 ranks and 3 on hosts of 1, 2 and 3 (no HAR_NODE_SIZE)" nodes
# World and duplicate span the hosts alike; the halves have one rank per
# host (rails) and the reversed subset uneven hosts (leader): every one
# crosses hosts, so every call shows the transport its size takes
# (--expect across: recursive doubling up to 64 KiB, the ring above).
hcheck "2 hosts of 2: full matrix, rails, doubling and ring (world, duplicate)" \
    $hosts 2 2 -- "$prog" --counts 0,1,7,63,64,1000,65537 --expect rails,across --comms 2
hcheck "2 hosts of 2: every communicator, counts above the slot, sampled (seed $seed)" \
    $hosts 2 2 -- "$prog" --counts 65537,300001 --sample 4 --seed "$seed" --expect ring --comms 4
hcheck "hosts of 1, 2 and 3 ranks: leader mode, doubling and ring, sampled (seed $seed)" \
    $hosts --ranks 1,2,3 -- "$prog" --counts $counts --sample 10 --seed "$seed" --expect leader,across --comms 2
hcheck "4 hosts of 1: doubling and ring between single ranks" \
    $hosts 4 1 -- "$prog" --counts 1,7,1000,65537 --expect rails,across --comms 2
# Three nodes are no power of two: the third hands its data to the first and
# gets the result back. Every size, chunked ones too, by HAR_INTER=doubling.
hcheck "3 hosts of 1, every call by recursive doubling (HAR_INTER=doubling), sampled (seed $seed)" \
    env HAR_INTER=doubling $hosts 3 1 -- "$prog" --counts $counts --sample 10 --seed "$seed" --expect rails,doubling --comms 2
hcheck "4 hosts of 1, counts above the slot, the ring streamed, sampled (seed $seed)" \
    $hosts 4 1 -- "$prog" --counts 300001 --sample 3 --seed "$seed" --expect rails,ring,streamed --comms 4
hcheck "2 hosts of 1, the ring streamed (HAR_INTER=ring), 4 KiB slots: full matrix" \
    env HAR_INTER=ring HAR_SLOT_BYTES=4K $hosts 2 1 -- "$prog" --counts 1,7,1000,65537 --expect rails,ring,streamed
# As in tests/mpi/matrix.sh, HAR_INTER=mpi keeps to the types both MPIs reduce right.
hcheck "2 hosts of 2, inter-node by the MPI (HAR_INTER=mpi)" \
    env HAR_INTER=mpi $hosts 2 2 -- "$prog" --counts 1,1000,65537 --expect rails,inter_mpi --comms 2 \
    --types int,int32,int64,long,float,double,c_bool,byte
hcheck_fails "a wrong --expect fails (leader on hosts of equal size)" "FAIL rank" \
    $hosts 2 2 -- "$prog" --counts 7 --types int --no-mpi-cases --expect leader
hcheck_fails "HAR_TEST_CORRUPT=2:3 (one element on rank 2, host h2) is caught" "FAIL rank 2" \
    env HAR_TEST_CORRUPT=2:3 $hosts 2 2 -- "$prog" --counts 7 --no-mpi-cases --sample 20 --seed "$seed"
preloaded() {
    env HAR_VERBOSE=1 $hosts --lib "$top_builddir/.libs/libhar.so" 2 2 -- "$bin/mpi/plain_app" > "$tmp/a" 2>&1
    s=$?
    cat "$tmp/a"
    [ $s = 0 ] && [ "$(grep -Ec "calls per path:.* rails=[1-9].* (ring|doubling)=[1-9]" "$tmp/a")" = 4 ]
}
hcheck "an unmodified program with libhar.so preloaded (--lib): har serves it across 2 hosts" preloaded

# The soak: mixed sizes, types, ops, in place or not, and communicators, each
# result checked against its own reference and across ranks, several seeds.
for k in 1 2 3; do
    s=$((seed + k))
    hcheck "soak, 2 hosts of 2, seed $s: every result right" \
        $hosts 2 2 -- "$prog" --counts 1,63,1000,4097,65537,300001 --sample 12 --seed "$s" --comms 4 --expect across
    hcheck "soak, hosts of 2, 1 and 1, seed $s: every result right" \
        $hosts --ranks 2,1,1 -- "$prog" --counts 1,63,1000,4097,65537,300001 --sample 12 --seed "$s" --comms 4 --expect across
done

# --shared-net needs unshare and nsenter only: ip and tc are kept off PATH.
mkdir "$tmp/path"
for f in /usr/local/bin/* /usr/bin/* /usr/sbin/* /bin/* /sbin/*; do
    case "${f##*/}" in ip|tc) ;; *) [ -e "$tmp/path/${f##*/}" ] || ln -s "$f" "$tmp/path/" ;; esac
done
shared() {
    env PATH="$tmp/path" HAR_VERBOSE=2 $hosts --shared-net 2 2 -- "$prog" --counts 1,1000,65537 --comms 2 \
        --expect rails,across > "$tmp/a" 2>&1
    s=$?
    cat "$tmp/a"
    [ $s = 0 ] && ! PATH="$tmp/path" command -v ip && ! PATH="$tmp/path" command -v tc &&
        [ "$(grep -c "communicator of 4 ranks: node [01] of 2," "$tmp/a")" -ge 4 ]
}
if [ -n "$shared_why" ]; then
    tap_skip "--shared-net, 2 hosts of 2, without ip and tc" "$shared_why"
else
    check "--shared-net, 2 hosts of 2, without ip and tc on PATH: 2 nodes, rails and ring" shared
fi
done_testing
