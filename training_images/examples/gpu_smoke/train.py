"""The GPU check's training script: a small MLP trained on CUDA with murphy's hook.

It refuses to run on the CPU (``/opt/ml/output/failure`` says why), so a job that completes
proves the container saw the GPU, trained on it, and saved tensors the rules could read.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import torch
from torch import nn

from murphy.hook.torch import Hook


def fail(message: str) -> None:
    with open(os.path.join(os.environ.get("SM_OUTPUT_DIR", "/opt/ml/output"), "failure"), "w") as f:
        f.write(message)
    sys.exit(1)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--lr", type=float, default=0.01)
    args = ap.parse_args()
    if not torch.cuda.is_available():
        fail(f"GPUCheckError: torch {torch.__version__} (CUDA {torch.version.cuda}) sees no GPU in this container")
    device = torch.device("cuda:0")
    print(json.dumps({"torch": torch.__version__, "cuda": torch.version.cuda, "gpus": torch.cuda.device_count(),
                      "device": torch.cuda.get_device_name(0), "SM_NUM_GPUS": os.environ.get("SM_NUM_GPUS")}), flush=True)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 1)).to(device)
    loss_fn = nn.MSELoss()
    hook = Hook.create_from_json_file()
    hook.register_module(model)
    hook.register_loss(loss_fn)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr)
    x = torch.randn(4096, 64, device=device)
    y = x[:, :1] * 3.0 - 1.0
    for step in range(args.steps):
        idx = torch.randint(0, x.shape[0], (128,), device=device)
        opt.zero_grad()
        loss = loss_fn(model(x[idx]), y[idx])
        loss.backward()
        opt.step()
        if step % 20 == 0:
            print(f"step={step} loss={loss.item():.5f}", flush=True)
    torch.cuda.synchronize()
    hook.close()
    torch.save(model.state_dict(), os.path.join(os.environ.get("SM_MODEL_DIR", "/opt/ml/model"), "model.pt"))


if __name__ == "__main__":
    main()
