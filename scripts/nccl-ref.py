"""NCCL's blocking all-reduce (launch + stream synchronise), float32 sum, one
process per GPU, timed the way har-bench times har: median over iterations
of the slowest rank. A reference to print beside har-bench's table.
    python3 scripts/nccl-ref.py [--max BYTES]    (needs PyTorch with NCCL)"""
import os, sys, time
import torch, torch.distributed as dist, torch.multiprocessing as mp


def run(rank, world, sizes, port):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), NCCL_NVLS_ENABLE="0")
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", rank=rank, world_size=world)
    for nbytes in sizes:
        x = torch.ones(nbytes // 4, device="cuda")
        iters = max(10, min(1000, int(2e8 / nbytes)))
        for _ in range(5):
            dist.all_reduce(x)
        torch.cuda.synchronize()
        times = torch.zeros(iters, dtype=torch.float64)
        for i in range(iters):
            t0 = time.perf_counter()
            dist.all_reduce(x)
            torch.cuda.synchronize()
            times[i] = time.perf_counter() - t0
        t = times.cuda()
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        med = t.cpu().median().item() * 1e6
        if rank == 0:
            busbw = nbytes / med * 1e-3 * 2 * (world - 1) / world
            print(f"{nbytes:12d} {med:12.2f} {busbw:10.2f}GB", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    top = int(sys.argv[sys.argv.index("--max") + 1]) if "--max" in sys.argv else 1 << 30
    sizes, s = [], 1024
    while s <= top:
        sizes.append(s)
        s *= 4
    world = torch.cuda.device_count()
    print(f"# NCCL {torch.cuda.nccl.version()} via PyTorch {torch.__version__}: {world} ranks, float32 sum, "
          f"blocking (all_reduce + synchronize), median of the slowest rank\n{'bytes':>12} {'nccl_us':>12} {'busbw':>12}")
    mp.spawn(run, args=(world, sizes, 29511), nprocs=world)
