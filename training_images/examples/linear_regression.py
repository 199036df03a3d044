"""The seed article's 2-D linear regression, ported to PyTorch, with murphy's hook.

``y_hat = x @ w`` with ``w`` initialised to ``[[10], [10]]``, true weights ``[[1], [1]]``,
``x = random((10, 2)) * scale``, MSE loss. The article used TensorFlow 1's ``AdamOptimizer``; its
kernel updates the second moment as ``v += (g*g - v) * (1 - beta2)``. With ``lr=100`` and
``scale=1e11`` the squared gradient (~1e46) overflows float32 to ``inf`` at step 0, and at step 1
``inf - inf = nan`` poisons ``v``, the weights, the loss and every gradient: NaN from step 2, as in
the article. ``torch.optim.Adam`` computes ``beta2*v + (1-beta2)*g*g`` instead, which stays
``inf`` without ever producing NaN, so this script applies Adam the way TF1's kernel does
(:class:`TF1Adam`); see docs/seed.md.

Run as a script (SageMaker script mode: hyperparameters arrive as ``--name value``) or import
:func:`train`.
"""

from __future__ import annotations

import argparse
import math
import os

import numpy as np
import torch

from murphy.hook import SaveConfig
from murphy.hook.torch import Hook


class TF1Adam(torch.optim.Optimizer):
    """Adam with TensorFlow 1's update order (``ApplyAdam`` kernel)."""

    def __init__(self, params: object, lr: float = 1e-3, beta1: float = 0.9, beta2: float = 0.999, eps: float = 1e-8) -> None:
        super().__init__(params, {"lr": lr, "beta1": beta1, "beta2": beta2, "eps": eps})  # type: ignore[arg-type]

    @torch.no_grad()
    def step(self, closure: object = None) -> None:  # type: ignore[override]
        for group in self.param_groups:
            lr, b1, b2, eps = group["lr"], group["beta1"], group["beta2"], group["eps"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state:
                    state["t"] = 0
                    state["m"] = torch.zeros_like(p)
                    state["v"] = torch.zeros_like(p)
                state["t"] += 1
                t = state["t"]
                g = p.grad
                lr_t = lr * math.sqrt(1 - b2**t) / (1 - b1**t)
                state["m"] += (g - state["m"]) * (1 - b1)
                state["v"] += (g * g - state["v"]) * (1 - b2)
                p -= lr_t * state["m"] / (state["v"].sqrt() + eps)


class LinearRegression(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.full((2, 1), 10.0))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x @ self.weight


def train(out_dir: str, lr: float = 100.0, scale: float = 1e11, steps: int = 10, debug_frequency: int = 1, seed: int = 0) -> list[float]:
    """Train and save weights, gradients and losses every ``debug_frequency`` steps; return the losses."""
    rng = np.random.default_rng(seed)
    model = LinearRegression()
    loss_fn = torch.nn.MSELoss()
    opt = TF1Adam(model.parameters(), lr=lr)
    hook = Hook(
        out_dir=out_dir,
        save_config=SaveConfig(save_interval=debug_frequency),
        include_collections=["weights", "gradients", "losses"],
    )
    hook.register_module(model)
    hook.register_loss(loss_fn)
    losses = []
    true_w = torch.ones((2, 1))
    for step in range(steps):
        x = torch.tensor(rng.random((10, 2)) * scale, dtype=torch.float32)
        y = x @ true_w
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
        print(f"Step={step}, Loss={losses[-1]:.2e}", flush=True)
    hook.close()
    return losses


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lr", type=float, default=100.0)
    parser.add_argument("--scale", type=float, default=1e11)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--debug_frequency", type=int, default=1)
    parser.add_argument("--out_dir", default=os.environ.get("MURPHY_OUT_DIR", "/opt/ml/output/tensors"))
    args = parser.parse_args()
    train(args.out_dir, args.lr, args.scale, args.steps, args.debug_frequency)


if __name__ == "__main__":
    main()
