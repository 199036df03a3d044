"""The small CNN and the hook API lookup the PyTorch benchmark workers share
(``_hook_bench_worker.py``: MNIST-sized; ``_writer_bench_worker.py``: about 10x the parameters,
so a step saves megabytes). Imported by those workers, which run as scripts from this directory
in murphy's venv or smdebug's."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn


class Net(nn.Module):
    """2 conv blocks + 2 linear layers on 28x28x1 inputs; the layer names are the saved tensors'."""

    def __init__(self, c1: int = 8, c2: int = 16, hidden: int = 64) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, c1, 3)
        self.relu1 = nn.ReLU()
        self.pool1 = nn.MaxPool2d(2)
        self.conv2 = nn.Conv2d(c1, c2, 3)
        self.relu2 = nn.ReLU()
        self.pool2 = nn.MaxPool2d(2)
        self.fc1 = nn.Linear(c2 * 5 * 5, hidden)
        self.relu3 = nn.ReLU()
        self.fc2 = nn.Linear(hidden, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.pool1(self.relu1(self.conv1(x)))
        x = self.pool2(self.relu2(self.conv2(x)))
        return self.fc2(self.relu3(self.fc1(torch.flatten(x, 1))))


def hook_api(impl: str) -> tuple[Any, Any, Any, Any]:
    """``(Hook, SaveConfig, ReductionConfig, modes)`` of smdebug's PyTorch hook or murphy's."""
    if impl == "smdebug":
        import smdebug.pytorch as smd

        return smd.Hook, smd.SaveConfig, smd.ReductionConfig, smd.modes
    from murphy.core import ModeKeys, ReductionConfig, SaveConfig
    from murphy.hook.torch import Hook

    return Hook, SaveConfig, ReductionConfig, ModeKeys
