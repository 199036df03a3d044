"""The training run both hooks record in the compatibility tests.

It imports only torch and numpy, so the smdebug virtualenv and murphy's virtualenv run the very
same code; the caller passes the hook API (smdebug's or murphy's, which share names). It runs as
one rank of a ``torch.distributed`` gloo group when ``WORLD_SIZE`` > 1, because smdebug's PyTorch
hook takes its worker name (``worker_<rank>``) and worker count from torch.distributed.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from torch import nn

# mode, number of forward steps: global steps 0-5 TRAIN, 6-8 EVAL, 9-11 TRAIN.
SCHEDULE = (("TRAIN", 6), ("EVAL", 3), ("TRAIN", 3))
SAVE_INTERVAL = 2
REDUCTIONS = {"reductions": ["min", "max", "mean"], "norms": ["l2"], "abs_reductions": ["mean"]}
COLLECTIONS = ["weights", "biases", "gradients", "losses"]
INCLUDE_REGEX = ["relu_output"]


@dataclass
class HookApi:
    """The four names a training script needs from smdebug.pytorch (or murphy.hook)."""

    Hook: Any
    SaveConfig: Any
    ReductionConfig: Any
    modes: Any


class Net(nn.Module):
    """A small CNN: conv → relu → linear, on 1x8x8 inputs, 3 classes."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(1, 4, kernel_size=3)
        self.relu = nn.ReLU()
        self.fc = nn.Linear(4 * 6 * 6, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.flatten(self.relu(self.conv(x)), 1))


def _init_distributed() -> tuple[int, int]:
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    if world > 1:
        dist.init_process_group("gloo", init_method="env://", rank=rank, world_size=world)
    return rank, world


def make_hook(api: HookApi, out_dir: str) -> Any:
    """The hook configuration both sides use."""
    return api.Hook(
        out_dir=out_dir,
        save_config=api.SaveConfig(save_interval=SAVE_INTERVAL),
        reduction_config=api.ReductionConfig(save_raw_tensor=True, **REDUCTIONS),
        include_collections=list(COLLECTIONS),
        include_regex=list(INCLUDE_REGEX),
        include_workers="all",
    )


def run(api: HookApi, out_dir: str, truth_dir: str | None = None) -> None:
    """Train per SCHEDULE with the hook; optionally record ground truth (losses, parameters)."""
    torch.set_num_threads(1)
    rank, world = _init_distributed()
    torch.manual_seed(0)  # same initial weights on every rank
    model = Net()
    loss_fn = nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    gen = torch.Generator().manual_seed(1000 + rank)  # different data per rank
    hook = make_hook(api, out_dir)
    hook.register_module(model)
    hook.register_loss(loss_fn)
    if world > 1:
        dist.barrier()  # no rank may close (end marker) before every rank created its hook
    truth: dict[str, np.ndarray] = {}
    for mode_name, n in SCHEDULE:
        mode = getattr(api.modes, mode_name)
        hook.set_mode(mode)
        model.train(mode_name == "TRAIN")
        for _ in range(n):
            step = sum(1 for k in truth if k.startswith("loss/"))
            for pname, p in model.named_parameters():
                truth[f"param/{step}/{pname}"] = p.detach().numpy().copy()
            x = torch.randn(16, 1, 8, 8, generator=gen)
            y = torch.randint(0, 3, (16,), generator=gen)
            with torch.set_grad_enabled(mode_name == "TRAIN"):
                loss = loss_fn(model(x), y)
            truth[f"loss/{step}/{mode_name}"] = loss.detach().numpy().copy()
            if mode_name == "TRAIN":
                opt.zero_grad()
                loss.backward()
                opt.step()
    if world > 1:
        dist.barrier()
    hook.close()
    if truth_dir is not None:
        Path(truth_dir).mkdir(parents=True, exist_ok=True)
        np.savez(Path(truth_dir) / f"truth_worker_{rank}.npz", **truth)
    if world > 1:
        dist.destroy_process_group()
