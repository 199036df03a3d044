"""A v3 script-mode entry script (``SourceCode(source_dir=..., entry_script="train.py")``), as a
user writes it for SageMaker: paths are SageMaker's own (``SM_MODEL_DIR`` from the SDK's
sm_training.env is ``/opt/ml/model``), the Debugger hook comes from the job's
debughookconfig.json when the job has one (murphy's hook, which reads smdebug's file). A huge
--lr makes the loss and gradients overflow to inf/nan; --step_seconds stands for real work."""

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

config = os.environ.get("SMDEBUG_CONFIG_FILE_PATH", "/opt/ml/input/config/debughookconfig.json")
hook = Hook.create_from_json_file() if os.path.exists(config) else None
print(f"cwd {os.getcwd()} model_dir {os.environ['SM_MODEL_DIR']} hook {hook is not None}", flush=True)

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
loss_fn = torch.nn.MSELoss()
opt = torch.optim.SGD(model.parameters(), lr=args.lr)
if hook is not None:
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
if hook is not None:
    hook.close()
torch.save(model.state_dict(), os.path.join(os.environ["SM_MODEL_DIR"], "model.pt"))
