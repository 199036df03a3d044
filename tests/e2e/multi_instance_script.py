"""A ``torch.distributed`` (gloo) training script written for SageMaker, run by the multi-instance
tests unchanged on every runtime (it is the job's ``sagemaker_program``).

It prints its view of SageMaker's host contract as one ``CONTRACT {json}`` log line per rank,
saves tensors through smdebug's hook (``include_workers=all`` in the job's hook parameters) and,
on request, puts a NaN in rank ``--nan-rank``'s input at step ``--nan-step`` or fails rank
``--fail-rank`` (a failure file, then exit 3) at step ``--fail-step``, or makes rank
``--flat-loss-rank``'s loss flat (a constant, with no gradient) while the other ranks' loss falls
steadily on one fixed batch.
"""

import argparse
import json
import os
import socket
import sys
import time

import smdebug.pytorch as smd
import torch
import torch.distributed as dist

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=300)
parser.add_argument("--sleep", type=float, default=0.05)
parser.add_argument("--nan-rank", type=int, default=-1)
parser.add_argument("--nan-step", type=int, default=4)
parser.add_argument("--fail-rank", type=int, default=-1)
parser.add_argument("--fail-step", type=int, default=2)
parser.add_argument("--flat-loss-rank", type=int, default=-1)
args, _ = parser.parse_known_args()

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
config_dir = os.environ["SM_INPUT_CONFIG_DIR"]
with open(os.path.join(config_dir, "resourceconfig.json")) as f:
    resource_config = json.load(f)
names = ("SM_HOSTS", "SM_CURRENT_HOST", "SM_NUM_CPUS", "SM_NUM_GPUS", "SM_RESOURCE_CONFIG", "SM_TRAINING_ENV",
         "RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")
aliases = None
if os.environ.get("HOSTALIASES"):  # on Kubernetes, the toolkit's map of the host names (glibc)
    with open(os.environ["HOSTALIASES"]) as f:
        aliases = f.read()
print("CONTRACT " + json.dumps({"rank": rank, "world": world, "resourceconfig": resource_config,
                                "hostname": socket.gethostname(), "env": {k: os.environ.get(k) for k in names},
                                "hostaliases": aliases}),
      flush=True)

torch.manual_seed(0)
model = torch.nn.Linear(4, 1)
hook = smd.Hook.create_from_json_file()
hook.register_module(model)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
loss_fn = torch.nn.MSELoss()
hook.register_loss(loss_fn)
fixed_x = torch.randn(8, 4)
for step in range(args.steps):
    # One fixed batch when a flat loss is asked for: the healthy ranks' loss then falls at every
    # step (gradient descent on a convex quadratic), so only the flat rank can be found.
    x = fixed_x if args.flat_loss_rank >= 0 else torch.randn(8, 4)
    if rank == args.nan_rank and step == args.nan_step:
        x[0, 0] = float("nan")
    if rank == args.fail_rank and step == args.fail_step:
        with open(os.path.join(os.environ["SM_OUTPUT_DIR"], "failure"), "w") as f:
            f.write(f"RuntimeError: rank {rank} gave up at step {step}")
        print(f"rank {rank} fails at step {step}", flush=True)
        sys.exit(3)
    optimizer.zero_grad()
    out = model(x)
    if rank == args.flat_loss_rank:
        out = out * 0 + 1  # the loss is 1.0 at every step and this rank's gradients are zero
    loss = loss_fn(out, torch.zeros(8, 1))
    loss.backward()
    for p in model.parameters():  # data parallel by hand: gradients averaged over the ranks
        dist.all_reduce(p.grad)
        p.grad /= world
    optimizer.step()
    print(f"rank {rank} step {step} loss {loss.item():.4f}", flush=True)
    time.sleep(args.sleep)
dist.destroy_process_group()
