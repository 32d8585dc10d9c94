"""overlap.py - data-parallel training in PyTorch whose gradients are
all-reduced with MPI_Iallreduce (mpi4py) while the backward pass goes on,
beside the same training with a blocking MPI_Allreduce per gradient.

Every rank holds a copy of a deep MLP (tanh layers of width 256) and its own
shard of a synthetic regression task. In the non-blocking mode a hook on
each parameter posts the all-reduce of its gradient as soon as autograd has
accumulated it, and the step waits for all of them before the optimizer
runs, as data-parallel frameworks do; in the blocking mode the gradients
are all-reduced one by one after the backward pass. Both modes train from
the same start; each prints its median step time, and the ratio.

Checks (rank 0 prints "CHECK ok" or "CHECK FAILED" for each, per mode):
  - the first step's all-reduced gradient of the first layer's weights
    equals the sum of every rank's, gathered with MPI_Gather (within 1e-5
    of the sum of magnitudes);
  - every rank ends with bitwise-identical parameters;
  - the loss over the shards has fallen.
The exit status is 1 if any check fails.

On a GPU (one per local rank, shared round robin) the tensors live in
device memory, which a CUDA-aware MPI, or har in front of any MPI, reduces.
MPI calls are not ordered with CUDA streams: each hook waits for the
stream that computed the gradient before posting its all-reduce.

Run:  mpirun -np 4 python3 overlap.py [--steps N] [--mode both|blocking|nonblocking] [--cpu]
"""
import argparse
import statistics
import sys
import time

import torch
import mpi4py

# The hooks post from autograd's device thread and the step waits in the
# main thread, never at once: "serialized" says so. Under mpi4py's default,
# "multiple", har leaves every MPI_Iallreduce to the MPI (its kernels serve
# calls only where no other thread may be in MPI at the same time).
mpi4py.rc.thread_level = "serialized"
from mpi4py import MPI  # noqa: E402 (after the thread level is set)

N_IN, WIDTH, LAYERS, BATCH, SAMPLES = 64, 256, 6, 32, 512


def make_model(device):
    torch.manual_seed(42)  # the same start on every rank and in both modes
    layers, width_in = [], N_IN
    for _ in range(LAYERS):
        layers += [torch.nn.Linear(width_in, WIDTH), torch.nn.Tanh()]
        width_in = WIDTH
    layers.append(torch.nn.Linear(width_in, 1))
    return torch.nn.Sequential(*layers).to(device)


def make_shard(rank, device):
    gen = torch.Generator().manual_seed(1000 + rank)
    x = torch.rand(SAMPLES, N_IN, generator=gen) * 2 - 1
    scale = torch.arange(N_IN, dtype=torch.float32) % 7 + 1
    y = torch.sin(1.7 * x * scale).sum(dim=1, keepdim=True) / N_IN * 4
    return x.to(device), y.to(device)


def sync(device):
    if device.type == "cuda":
        torch.cuda.current_stream(device).synchronize()


def check(comm, what, ok, mode):
    ok = comm.allreduce(int(ok), op=MPI.MIN)
    if comm.rank == 0:
        print(f"overlap.py: {mode}: CHECK {'ok' if ok else 'FAILED'}: {what}", flush=True)
    return bool(ok)


def train(comm, grads_comm, device, steps, nonblocking):
    mode = "non-blocking" if nonblocking else "blocking"
    model = make_model(device)
    params = list(model.parameters())
    x, y = make_shard(comm.rank, device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    pending = []

    def post(p):  # a parameter's gradient is complete: all-reduce it now
        sync(device)  # the MPI reads the memory itself, outside any stream
        pending.append(grads_comm.Iallreduce(MPI.IN_PLACE, [p.grad, MPI.FLOAT], op=MPI.SUM))

    hooks = [p.register_post_accumulate_grad_hook(post) for p in params] if nonblocking else []

    def shard_loss():
        with torch.no_grad():
            local = torch.nn.functional.mse_loss(model(x), y).item()
        return comm.allreduce(local, op=MPI.SUM) / comm.size

    before, times, ok = shard_loss(), [], True
    for s in range(steps):
        first = (s * BATCH) % SAMPLES
        xb, yb = x[first:first + BATCH], y[first:first + BATCH]
        comm.Barrier()
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=False)
        loss = torch.nn.functional.mse_loss(model(xb), yb)
        loss.backward()
        if nonblocking:
            MPI.Request.Waitall(pending)
            pending.clear()
        else:
            sync(device)
            for p in params:
                grads_comm.Allreduce(MPI.IN_PLACE, [p.grad, MPI.FLOAT], op=MPI.SUM)
        summed = params[0].grad.detach().clone()
        for p in params:
            p.grad /= comm.size
        opt.step()
        sync(device)
        times.append(time.perf_counter() - t0)
        if s == 0:
            # Each rank's local gradient of the first step, recomputed
            # without communication, gathered and summed in float64.
            probe = make_model(device)
            torch.nn.functional.mse_loss(probe(xb), yb).backward()
            local = probe[0].weight.grad.detach().double().cpu().contiguous()
            gathered = comm.gather(local, root=0)
            good = True
            if comm.rank == 0:
                stack = torch.stack(gathered)
                good = bool(((summed.double().cpu() - stack.sum(0)).abs()
                             <= 1e-5 * stack.abs().sum(0) + 1e-30).all())
            ok &= check(comm, "the first layer's all-reduced gradient is the sum of every rank's", good, mode)
    for h in hooks:
        h.remove()
    slowest = torch.tensor(times, dtype=torch.float64)  # each step's slowest rank
    comm.Allreduce(MPI.IN_PLACE, [slowest, MPI.DOUBLE], op=MPI.MAX)
    times = slowest.tolist()
    bits = torch.cat([p.detach().flatten() for p in params]).cpu().view(torch.int32)
    lo, hi = bits.clone(), bits.clone()
    comm.Allreduce(MPI.IN_PLACE, [lo, MPI.INT], op=MPI.MIN)
    comm.Allreduce(MPI.IN_PLACE, [hi, MPI.INT], op=MPI.MAX)
    ok &= check(comm, "every rank's parameters are bitwise identical", torch.equal(lo, hi), mode)
    after = shard_loss()
    ok &= check(comm, f"the loss fell from {before:.4f} to {after:.4f}", after < before, mode)
    return ok, statistics.median(times) * 1e3


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--mode", choices=("both", "blocking", "nonblocking"), default="both")
    ap.add_argument("--cpu", action="store_true", help="host tensors even where a GPU is")
    args = ap.parse_args()
    comm = MPI.COMM_WORLD
    device = torch.device("cpu")
    if torch.cuda.is_available() and not args.cpu:
        local = comm.Split_type(MPI.COMM_TYPE_SHARED).rank
        device = torch.device("cuda", local % torch.cuda.device_count())
        torch.cuda.set_device(device)
    grads_comm = comm.Dup()  # the gradients' own communicator, as frameworks keep one
    modes = {"both": (False, True), "blocking": (False,), "nonblocking": (True,)}[args.mode]
    ok, ms = True, {}
    for nonblocking in modes:
        good, ms[nonblocking] = train(comm, grads_comm, device, args.steps, nonblocking)
        ok &= good
    if comm.rank == 0:
        print(f"overlap.py: {comm.size} ranks, {args.steps} steps, {2 * (LAYERS + 1)} gradients of up to "
              f"{WIDTH * WIDTH * 4 // 1024} KiB ({device.type} memory)")
        if False in ms:
            print(f"overlap.py: blocking MPI_Allreduce per gradient: median step {ms[False]:.3f} ms")
        if True in ms:
            print(f"overlap.py: MPI_Iallreduce per gradient during the backward pass: median step {ms[True]:.3f} ms")
        if len(ms) == 2:
            print(f"overlap.py: non-blocking / blocking step time: {ms[True] / ms[False]:.3f}")
    grads_comm.Free()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
