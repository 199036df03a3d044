"""The seed article's 2-D linear regression, ported to PyTorch, with murphy's hook.

``y_hat = x @ w`` with ``w`` initialised to ``[[10], [10]]``, true weights ``[[1], [1]]``,
``x = random((10, 2)) * scale``, MSE loss. The article used TensorFlow 1's ``AdamOptimizer``; its
kernel updates the second moment as ``v += (g*g - v) * (1 - beta2)``. With ``lr=100`` and
``scale=1e11`` the squared gradient (~1e46) overflows float32 to ``inf`` at step 0, and at step 1
``inf - inf = nan`` poisons ``v``, the weights, the loss and every gradient: NaN from step 2, as in
the article. ``torch.optim.Adam`` computes ``beta2*v + (1-beta2)*g*g`` instead, which stays
``inf`` without ever producing NaN, so this script applies Adam the way TF1's kernel does
(:class:`TF1Adam`); see docs/seed.md.

Run as ``python -m murphy.demos.linear_regression --lr 100 --steps 10 --scale 1e11
--debug_frequency 1`` (the image ``murphy/linear-regression-demo:latest``; SageMaker passes
hyperparameters as ``--name value``) or import :func:`train`. Inside a SageMaker-style container
(``SMDEBUG_CONFIG_FILE_PATH`` set, or ``/opt/ml/input/config/debughookconfig.json`` present) the
hook comes from that file; weights, gradients and losses are always saved, every
``debug_frequency`` steps unless the file sets a save interval.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
from collections.abc import Sequence

import numpy as np
import torch

from murphy.hook import HookConfig, SaveConfig
from murphy.hook.config import CONFIG_FILE_PATH_ENV, DEFAULT_CONFIG_FILE_PATH
from murphy.hook.torch import Hook

DEMO_COLLECTIONS = ("weights", "gradients", "losses")


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


def default_hook(out_dir: str, debug_frequency: int) -> Hook:
    """Weights, gradients and losses every ``debug_frequency`` steps."""
    return Hook(
        out_dir=out_dir,
        save_config=SaveConfig(save_interval=debug_frequency),
        include_collections=list(DEMO_COLLECTIONS),
    )


def sagemaker_config_path() -> str | None:
    """The hook configuration of a SageMaker-style container, if this is one."""
    path = os.environ.get(CONFIG_FILE_PATH_ENV)
    if path:
        return path
    return DEFAULT_CONFIG_FILE_PATH if os.path.exists(DEFAULT_CONFIG_FILE_PATH) else None


def hook_from_config(path: str, debug_frequency: int) -> Hook:
    """The container's hook, made sure to save what the demo is about: the SDK sends
    ``CollectionConfigurations: []`` for ``Rule.sagemaker(exploding_tensor())``, which alone would
    save nothing useful."""
    cfg = HookConfig.load(path)
    included = tuple(dict.fromkeys((*DEMO_COLLECTIONS, *cfg.include_collections)))
    save_config = cfg.save_config if cfg.save_config is not None else SaveConfig(save_interval=debug_frequency)
    return Hook.from_config(dataclasses.replace(cfg, include_collections=included, save_config=save_config))


def train(out_dir: str | None, lr: float = 100.0, scale: float = 1e11, steps: int = 10, debug_frequency: int = 1,
          seed: int = 0, *, hook: Hook | None = None, model_dir: str | None = None) -> list[float]:
    """Train and save weights, gradients and losses every ``debug_frequency`` steps (with
    ``hook``, or a default hook writing to ``out_dir``); return the losses."""
    rng = np.random.default_rng(seed)
    model = LinearRegression()
    loss_fn = torch.nn.MSELoss()
    opt = TF1Adam(model.parameters(), lr=lr)
    if hook is None:
        if out_dir is None:
            raise ValueError("train() needs out_dir or hook")
        hook = default_hook(out_dir, debug_frequency)
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
    if model_dir:
        os.makedirs(model_dir, exist_ok=True)
        torch.save(model.state_dict(), os.path.join(model_dir, "model.pt"))
    return losses


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--lr", type=float, default=100.0)
    parser.add_argument("--scale", type=float, default=1e11)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--debug_frequency", type=int, default=1)
    parser.add_argument("--out_dir", default=None,
                        help="where tensors go (default: the container's hook config, else $MURPHY_OUT_DIR, "
                             "else $SM_OUTPUT_DIR/tensors)")
    args = parser.parse_args(argv)
    config = sagemaker_config_path()
    hook = None
    out_dir = args.out_dir
    if out_dir is None and config is not None:
        hook = hook_from_config(config, args.debug_frequency)
    elif out_dir is None:
        out_dir = os.environ.get("MURPHY_OUT_DIR") or os.path.join(os.environ.get("SM_OUTPUT_DIR", "/opt/ml/output"), "tensors")
    train(out_dir, args.lr, args.scale, args.steps, args.debug_frequency, hook=hook,
          model_dir=os.environ.get("SM_MODEL_DIR"))


if __name__ == "__main__":
    main()
