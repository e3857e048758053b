#!/usr/bin/env python3
"""PyTorch's side of ``examples/bench_ddp.rs``: the seed MLP's train step
(batch 256 split over the processes, cross entropy, clip_grad_norm_(1.0),
AdamW) under ``DistributedDataParallel`` on the CPU with the gloo backend,
one thread per process. Rank 0 prints one JSON line with bench_ddp's fields.

    python3 benches/torch_ddp_ref.py --processes 2

The processes meet over localhost (PyTorch's own rendezvous); tapir's side
runs under ``mpirun``. Same model, batch, optimizer and step counts.
"""
import argparse
import json
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_ref import ResidualMLP  # noqa: E402  (the seed MLP of torch_ref.py)


def worker(rank, args):
    torch.set_num_threads(args.threads)
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(args.port))
    dist.init_process_group("gloo", rank=rank, world_size=args.processes)
    world = args.processes
    per_rank = args.batch // world
    g = torch.Generator().manual_seed(0)
    xs = torch.randn(4, args.batch, 784, generator=g)
    ys = torch.randint(0, 10, (4, args.batch), generator=g)
    rows = slice(rank * per_rank, (rank + 1) * per_rank)
    xs, ys = xs[:, rows].contiguous(), ys[:, rows].contiguous()
    torch.manual_seed(0)
    model = nn.parallel.DistributedDataParallel(ResidualMLP(), bucket_cap_mb=args.bucket_cap_mb)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=1e-2)
    loss_fn = nn.CrossEntropyLoss()

    def step(i):
        opt.zero_grad(set_to_none=True)
        loss_fn(model(xs[i % 4]), ys[i % 4]).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()

    for i in range(10):
        step(i)
    dist.barrier()
    t0 = time.perf_counter()
    for i in range(args.steps):
        step(i)
    dist.barrier()
    seconds = time.perf_counter() - t0
    if rank == 0:
        print(json.dumps({
            "framework": "pytorch", "workload": "ddp_mlp", "backend": "gloo", "device": "cpu",
            "processes": world, "threads": args.threads, "batch": per_rank * world,
            "steps": args.steps, "seconds": round(seconds, 4),
            "samples_per_s": round(args.steps * per_rank * world / seconds, 2),
            "torch": torch.__version__,
        }), flush=True)
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--processes", type=int, default=1)
    p.add_argument("--threads", type=int, default=1, help="CPU threads per process")
    p.add_argument("--batch", type=int, default=256, help="global batch, split over the processes")
    p.add_argument("--steps", type=int, default=100, help="timed steps (after 10 untimed)")
    p.add_argument("--bucket-cap-mb", type=float, default=25.0)
    p.add_argument("--port", type=int, default=29517)
    args = p.parse_args()
    if args.processes < 1 or args.batch % args.processes:
        p.error("--processes must be at least 1 and divide --batch")
    mp.spawn(worker, args=(args,), nprocs=args.processes, join=True)


if __name__ == "__main__":
    main()
