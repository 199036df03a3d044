"""The training script of benchmarks/multi_instance_latency.py (a SageMaker torch.distributed
script, gloo): every rank saves through smdebug's hook; the last rank's input gets a NaN at step
``--nan-step``, and that rank prints ``{"nan_at": <epoch s>}`` when the step's backward is done."""

import argparse
import json
import time

import smdebug.pytorch as smd
import torch
import torch.distributed as dist

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=100000)
parser.add_argument("--nan-step", type=int, default=20)
parser.add_argument("--sleep", type=float, default=0.05)
args, _ = parser.parse_known_args()
dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
torch.manual_seed(rank)
model = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
hook = smd.Hook.create_from_json_file()
hook.register_module(model)
loss_fn = torch.nn.MSELoss()
hook.register_loss(loss_fn)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(args.steps):
    x = torch.randn(8, 16)
    if rank == world - 1 and step == args.nan_step:
        x[0, 0] = float("nan")
    optimizer.zero_grad()
    loss = loss_fn(model(x), torch.zeros(8, 1))
    loss.backward()
    for p in model.parameters():
        dist.all_reduce(p.grad)
        p.grad /= world
    optimizer.step()
    if rank == world - 1 and step == args.nan_step:
        print(json.dumps({"nan_at": time.time()}), flush=True)
    time.sleep(args.sleep)
