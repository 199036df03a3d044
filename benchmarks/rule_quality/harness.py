"""Training harness of the rule-quality suite: synthetic data, the hook configured the way SageMaker
configures it from the rules' ``CollectionConfigurations``, and a training loop that records when a
fault shows in the data (its onset).

Every run saves the same superset of tensors, so every rule can be judged on every healthy run:

* the collections the built-in rules ask for in ``murphy.rules.rule_configs`` (gradients, weights,
  losses, relu_input, relu_output), with ``save_interval`` scaled from 500 to the run's interval;
* what a user adds for the rules that ask for nothing: biases, tanh/sigmoid inputs (for
  SaturatedActivation), labels and predictions (for ClassImbalance), losses in EVAL mode (for
  Overfit / Overtraining).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from murphy.core.modes import ModeKeys
from murphy.hook.config import HookConfig
from murphy.hook.torch import Hook
from murphy.rules import rule_configs

# The rules whose rule_configs entries decide what is saved (their CollectionConfigurations).
CONFIG_RULES = ("vanishing_gradient", "weight_update_ratio", "loss_not_decreasing",
                "dead_relu", "poor_weight_initialization")
# What a user adds for the rules whose config requests nothing.
USER_COLLECTIONS: list[dict[str, Any]] = [
    {"CollectionName": "biases", "CollectionParameters": {}},
    {"CollectionName": "activations",
     "CollectionParameters": {"include_regex": ".*tanh_input|.*sigmoid_input"}},
]


def hook_config(out_dir: str, save_interval: int) -> dict[str, Any]:
    """A ``debughookconfig.json`` document: the rules' collections, saved every ``save_interval``."""
    colls: dict[str, dict[str, Any]] = {}
    for fn in CONFIG_RULES:
        for c in getattr(rule_configs, fn)().get("CollectionConfigurations", []):
            colls[c["CollectionName"]] = c
    for c in USER_COLLECTIONS:
        colls[c["CollectionName"]] = c
    every = str(save_interval)
    entries = [
        {"CollectionName": name,
         "CollectionParameters": {**c["CollectionParameters"], "save_interval": every}}
        for name, c in colls.items()
    ]
    return {"LocalPath": out_dir, "HookParameters": {"save_interval": every},
            "CollectionConfigurations": entries}


def make_hook(out_dir: str, save_interval: int = 1) -> Hook:
    """The PyTorch hook SageMaker would build from :func:`hook_config`."""
    return Hook.from_config(HookConfig.from_dict(hook_config(out_dir, save_interval)))


# ---- data ------------------------------------------------------------------------------------


@dataclass
class Data:
    """A classification (``classes > 0``) or regression data set, train and held-out split."""

    x_train: torch.Tensor
    y_train: torch.Tensor
    x_val: torch.Tensor
    y_val: torch.Tensor
    classes: int


def gaussian_classes(
    gen: torch.Generator, n_train: int, n_val: int, dim: int = 16, classes: int = 4,
    probs: list[float] | None = None, sep: float = 0.6, scale: float = 1.0, shift: float = 0.0,
) -> Data:
    """Class-conditional Gaussians: ``x = scale * (sep * mu_y + N(0, I)) + shift``."""
    mus = torch.randn(classes, dim, generator=gen)
    p = torch.tensor(probs if probs is not None else [1.0 / classes] * classes)

    def draw(n: int) -> tuple[torch.Tensor, torch.Tensor]:
        y = torch.multinomial(p, n, replacement=True, generator=gen)
        x = sep * mus[y] + torch.randn(n, dim, generator=gen)
        return scale * x + shift, y

    x_train, y_train = draw(n_train)
    x_val, y_val = draw(n_val)
    return Data(x_train, y_train, x_val, y_val, classes)


def teacher_classes(
    gen: torch.Generator, n_train: int, n_val: int, dim: int = 64, classes: int = 4, hidden: int = 32,
) -> Data:
    """Labels from a random one-hidden-layer tanh teacher: ``y = argmax(tanh(x @ a) @ b)``,
    ``x ~ N(0, I)``, ``a ~ N(0, 4 / dim)`` (steep units). The boundaries are nonlinear, so a
    student MLP keeps learning for hundreds of steps instead of reaching its floor within a few
    dozen as it does on well-separated class-conditional Gaussians."""
    a = 2 * torch.randn(dim, hidden, generator=gen) / math.sqrt(dim)
    b = torch.randn(hidden, classes, generator=gen) / math.sqrt(hidden)

    def draw(n: int) -> tuple[torch.Tensor, torch.Tensor]:
        x = torch.randn(n, dim, generator=gen)
        return x, (torch.tanh(x @ a) @ b).argmax(dim=1)

    x_train, y_train = draw(n_train)
    x_val, y_val = draw(n_val)
    return Data(x_train, y_train, x_val, y_val, classes)


def teacher_regression(gen: torch.Generator, n_train: int, n_val: int, dim: int = 16) -> Data:
    """``y = sin(x @ a) + 0.5 * x @ b`` plus noise: a smooth nonlinear target."""
    a, b = torch.randn(dim, 1, generator=gen) / math.sqrt(dim), torch.randn(dim, 1, generator=gen) / math.sqrt(dim)

    def draw(n: int) -> tuple[torch.Tensor, torch.Tensor]:
        x = torch.randn(n, dim, generator=gen)
        return x, torch.sin(x @ a) + 0.5 * (x @ b) + 0.05 * torch.randn(n, 1, generator=gen)

    x_train, y_train = draw(n_train)
    x_val, y_val = draw(n_val)
    return Data(x_train, y_train, x_val, y_val, 0)


# ---- training --------------------------------------------------------------------------------


@dataclass
class Plan:
    """How to train one run."""

    model: torch.nn.Module
    data: Data
    optimizer: Callable[[list[torch.nn.Parameter]], torch.optim.Optimizer]
    steps: int = 80
    batch: int = 128
    eval_every: int = 5  # train steps between evaluations (0: never)
    eval_batch: int = 1024  # one EVAL step sees this many held-out samples
    save_interval: int = 1


@dataclass
class RunLog:
    """What the training loop observed, in global steps (the steps the rules report)."""

    first_nonfinite: int | None = None
    val_losses: list[tuple[int, float]] = field(default_factory=list)  # (last eval step, mean)
    train_losses: list[float] = field(default_factory=list)
    global_steps: int = 0


def worst_quarter_change(log: RunLog) -> float | None:
    """The largest relative change of the run's loss from one quarter of the run to the next
    (validation losses when it evaluated, else training losses): below 0 when the loss fell
    throughout, the check that a healthy twin is still learning over its whole window."""
    losses = [v for _, v in log.val_losses] or log.train_losses
    q = len(losses) // 4
    if q == 0:
        return None
    tail = losses[-4 * q:]
    means = [sum(tail[i * q:(i + 1) * q]) / q for i in range(4)]
    return max(b / a - 1 for a, b in itertools.pairwise(means))


def _finite(tensors: list[torch.Tensor]) -> bool:
    return all(bool(torch.isfinite(t).all()) for t in tensors)


def _evaluate(plan: Plan, hook: Hook, loss_fn: torch.nn.Module, log: RunLog) -> None:
    hook.set_mode(ModeKeys.EVAL)
    data, total, n = plan.data, 0.0, 0
    with torch.no_grad():
        for i in range(0, len(data.x_val), plan.eval_batch):
            x, y = data.x_val[i:i + plan.eval_batch], data.y_val[i:i + plan.eval_batch]
            out = plan.model(x)
            loss = loss_fn(out, y)
            _save_targets(hook, data, y, out)
            total, n = total + float(loss) * len(x), n + len(x)
    log.val_losses.append((hook.step, total / max(n, 1)))
    hook.set_mode(ModeKeys.TRAIN)


def _save_targets(hook: Hook, data: Data, y: torch.Tensor, out: torch.Tensor) -> None:
    if data.classes:
        hook.save_tensor("labels", y, "labels")
        hook.save_tensor("predictions", out.detach(), "predictions")  # logits, as models emit


def train(plan: Plan, out_dir: str, seed: int) -> RunLog:
    """Train ``plan`` with the hook writing to ``out_dir``; minibatches drawn with ``seed``."""
    gen = torch.Generator().manual_seed(seed)
    hook = make_hook(out_dir, plan.save_interval)
    model, data = plan.model, plan.data
    loss_fn: torch.nn.Module = torch.nn.CrossEntropyLoss() if data.classes else torch.nn.MSELoss()
    hook.register_module(model)
    hook.register_loss(loss_fn)
    hook.set_mode(ModeKeys.TRAIN)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = plan.optimizer(params) if params else None
    log = RunLog()
    for step in range(plan.steps):
        idx = torch.randint(0, len(data.x_train), (min(plan.batch, len(data.x_train)),), generator=gen)
        x, y = data.x_train[idx], data.y_train[idx]
        weights_ok = _finite([p.detach() for p in model.parameters()])
        out = model(x)
        loss = loss_fn(out, y)
        _save_targets(hook, data, y, out)
        if opt is not None:
            opt.zero_grad()
            loss.backward()
            opt.step()
        grads = [p.grad for p in params if p.grad is not None]
        if log.first_nonfinite is None and not (weights_ok and _finite([loss.detach(), *grads])):
            log.first_nonfinite = hook.step
        log.train_losses.append(float(loss.detach()))
        if plan.eval_every and (step + 1) % plan.eval_every == 0:
            _evaluate(plan, hook, loss_fn, log)
    log.global_steps = hook.step + 1
    hook.close()
    return log
