"""A script-mode entry point as a user would write it for the PyTorch estimator: a small MLP on a
synthetic regression, with the Debugger hook built from the job's debughookconfig.json (murphy's
hook, which reads smdebug's file). A huge --lr makes the loss and gradients overflow to inf/nan.
--step_seconds stands for real work per step: the stock SDK looks at a job first 5 s after
creating it and prints no rule status at all for a job that has already ended by then."""

import argparse
import os
import time

import torch

from murphy.hook.torch import Hook

parser = argparse.ArgumentParser()
parser.add_argument("--lr", type=float, default=0.01)
parser.add_argument("--steps", type=int, default=10)
parser.add_argument("--step_seconds", type=float, default=0.0)
args = parser.parse_args()

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
loss_fn = torch.nn.MSELoss()
opt = torch.optim.SGD(model.parameters(), lr=args.lr)
hook = Hook.create_from_json_file()
hook.register_module(model)
hook.register_loss(loss_fn)
x = torch.randn(64, 4)
y = x.sum(dim=1, keepdim=True)
for step in range(args.steps):
    opt.zero_grad()
    loss = loss_fn(model(x), y)
    loss.backward()
    opt.step()
    print(f"step {step} loss {loss.item():.3e}", flush=True)
    time.sleep(args.step_seconds)
hook.close()
torch.save(model.state_dict(), os.path.join(os.environ.get("SM_MODEL_DIR", "."), "model.pt"))
