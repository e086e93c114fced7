#!/usr/bin/python3
"""Train a PyTorch model from plain Python on tern's shards (tern.torch).

One process per worker, against shards started by hand (`tern ps`); C++
workers (`tern worker --model=PATH.pt`) may train alongside
(python/tern/README.md):

    bazel build //tern //python/tern:_tern.so
    /usr/bin/python3 examples/tiny_bn_net.py --out tiny.pt
    bazel-bin/tern/tern ps --listen 127.0.0.1:50051 --num_workers 2 &
    export PYTHONPATH=$PWD/python:$PWD/bazel-bin/python
    for w in 0 1; do
      /usr/bin/python3 examples/torch_train.py --ps 127.0.0.1:50051 \\
          --worker_id $w --num_workers 2 --model tiny.pt --data_dir data &
    done

The model is the TorchScript file --model (every worker loads the same
file, so every replica starts from the same parameters), trained with
cross-entropy on DIR/train_x.npy and DIR/train_y.npy (the files of tern
worker's --dataset=npy), each worker on its own slice, with plain SGD: the
update `tern worker --optimizer sgd --momentum 0 --weight_decay 0` makes, so
C++ workers can join with the same --lr (and --broadcast_start: every worker
starts from worker 0's parameters, tern.torch.broadcast_parameters). It prints one line per
--log_every steps and, at the end, the parameters' checksum.
"""

import argparse
import sys
import time

import numpy as np
import torch

import tern.torch as tt


def batches(data_dir, worker_id, num_workers, batch_size, seed):
    """This worker's slice of the training set, reshuffled every epoch."""
    x = np.load(f"{data_dir}/train_x.npy", mmap_mode="r")
    y = np.load(f"{data_dir}/train_y.npy", mmap_mode="r")
    mine = np.arange(worker_id, len(x), num_workers)
    rng = np.random.default_rng(seed + worker_id)
    while True:
        order = rng.permutation(mine)
        for begin in range(0, len(order) - batch_size + 1, batch_size):
            rows = np.sort(order[begin:begin + batch_size])
            yield (torch.from_numpy(np.asarray(x[rows], dtype=np.float32)),
                   torch.from_numpy(np.asarray(y[rows], dtype=np.int64)))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ps", required=True,
                        help="the shards, host:port,host:port (shard order)")
    parser.add_argument("--worker_id", type=int, default=0)
    parser.add_argument("--num_workers", type=int, default=1)
    parser.add_argument("--codec", default="terngrad")
    parser.add_argument("--model", required=True, help="a TorchScript .pt")
    parser.add_argument("--data_dir", required=True)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--batch_size", type=int, default=16)
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--run_id", default="tern")
    parser.add_argument("--check_every", type=int, default=100)
    parser.add_argument("--log_every", type=int, default=0,
                        help="progress every N steps (0: only the last)")
    args = parser.parse_args()

    tt.init(ps=args.ps.split(","), worker_id=args.worker_id,
            num_workers=args.num_workers, codec=args.codec,
            model=args.model, run_id=args.run_id, seed=args.seed,
            check_every=args.check_every)
    model = torch.jit.load(args.model)
    model.train()
    opt = tt.DistributedOptimizer(
        torch.optim.SGD(model.parameters(), lr=args.lr),
        model.named_parameters())
    tt.broadcast_parameters(model)

    data = batches(args.data_dir, args.worker_id, args.num_workers,
                   args.batch_size, args.seed)
    start = time.monotonic()
    for step in range(args.steps):
        x, y = next(data)
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        last = step + 1 == args.steps
        if last or (args.log_every and (step + 1) % args.log_every == 0):
            rate = (step + 1) / (time.monotonic() - start)
            print(f"worker {args.worker_id} step {step + 1}/{args.steps} "
                  f"loss {loss.item():.4f} {rate:.2f} steps/s "
                  f"push {opt.last_exchange['push_bytes']} B", flush=True)
    # The final check, as tern worker's: the shards compare the replicas.
    print(f"final checksum {opt.check_params()}", flush=True)


if __name__ == "__main__":
    try:
        main()
    except tt.ShardError as e:
        print(f"tern: {e.code}: {e.message}", file=sys.stderr)
        sys.exit(1)
