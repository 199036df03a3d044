"""The labelled fault types: each builds a faulty run and its healthy twin (same architecture and
data, sane settings), names the rules that must catch the fault, and says where the fault starts.

Onset (global step): 0 for faults present from the first step (initialisation, data, frozen or
zero-lr optimiser, architecture); the first step where the training loop saw a non-finite loss,
gradient or weight for divergence; the evaluation with the lowest validation loss for overfitting
(the early-stopping point, after which the validation loss rises).
"""

from __future__ import annotations

import importlib.util
import itertools
import math
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

from . import xgb_scenarios as xgbs
from .harness import Plan, RunLog, gaussian_classes, teacher_classes, teacher_regression, train

REPO = Path(__file__).resolve().parents[2]
# Training samples (enough that a healthy run does not memorise them in 80-150 steps of 128) and
# held-out samples (one EVAL step each evaluation).
N_TRAIN, N_VAL = 16384, 1024
_ACTS: dict[str, Callable[[], torch.nn.Module]] = {
    "relu": torch.nn.ReLU, "tanh": torch.nn.Tanh, "sigmoid": torch.nn.Sigmoid,
}


class MLP(torch.nn.Module):
    """``Linear`` layers ``l<i>`` each followed by an activation module ``l<i>_<act>``, so the
    hook names its input ``l<i>_<act>_input_0`` (what ``.*relu_input`` etc. select) and
    alphabetical order is layer order."""

    def __init__(self, sizes: list[int], act: str, out: int) -> None:
        super().__init__()
        self.names: list[str] = []
        for i, (a, b) in enumerate(itertools.pairwise(sizes)):
            name = f"l{i:02d}"
            setattr(self, name, torch.nn.Linear(a, b))
            setattr(self, f"{name}_{act}", _ACTS[act]())
            self.names.append(name)
        self.act = act
        self.head = torch.nn.Linear(sizes[-1], out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for name in self.names:
            x = getattr(self, f"{name}_{self.act}")(getattr(self, name)(x))
        out: torch.Tensor = self.head(x)
        return out


def sgd(lr: float, momentum: float = 0.9) -> Callable[[list[torch.nn.Parameter]], torch.optim.Optimizer]:
    return lambda ps: torch.optim.SGD(ps, lr=lr, momentum=momentum)


def adam(lr: float) -> Callable[[list[torch.nn.Parameter]], torch.optim.Optimizer]:
    return lambda ps: torch.optim.Adam(ps, lr=lr)


Runner = Callable[[bool, int, str], RunLog | xgbs.XgbLog]


@dataclass(frozen=True)
class Fault:
    """One fault type: ``run(faulty, seed, out_dir)`` trains a run; ``onset`` reads its start."""

    name: str
    rules: tuple[str, ...]
    what: str
    run: Runner
    onset: Callable[[Any], int | None]


def at_start(_: RunLog) -> int | None:
    return 0


def first_nonfinite(log: RunLog) -> int | None:
    return log.first_nonfinite


def val_minimum(log: RunLog) -> int | None:
    return min(log.val_losses, key=lambda sv: sv[1])[0] if log.val_losses else None


def _seeded(seed: int) -> torch.Generator:
    torch.manual_seed(seed)
    return torch.Generator().manual_seed(seed)


# ---- the fault types --------------------------------------------------------------------------


def exploding_lr(faulty: bool, seed: int, out: str) -> RunLog:
    gen = _seeded(seed)
    data = teacher_regression(gen, N_TRAIN, N_VAL)
    model = MLP([16, 64, 64], "relu", 1)
    return train(Plan(model, data, sgd(2.0, momentum=0.0) if faulty else sgd(0.01), steps=60), out, seed)


_SEED_MODULE: ModuleType | None = None


def _seed_module() -> ModuleType:
    """The seed article's script, ``training_images/examples/linear_regression.py``."""
    global _SEED_MODULE
    if _SEED_MODULE is None:
        path = REPO / "training_images" / "examples" / "linear_regression.py"
        spec = importlib.util.spec_from_file_location("murphy_seed_linear_regression", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
        _SEED_MODULE = module
    return _SEED_MODULE


def seed_input_scale(faulty: bool, seed: int, out: str) -> RunLog:
    """The seed: TF1-style Adam, lr=100, inputs scaled by 1e11 (healthy: lr=0.3, scale 1).

    The twin's lr is 0.3, not 0.1: at 0.1 the weights move ~0.1 per step from 10 towards 1,
    the expected loss falls ~22 % per 10 steps while one 10-sample batch's loss scatters
    +-35 %, and on two of three seeds the mean loss of steps 10-19 was not below that of
    steps 0-9: progress no rule reading the loss can see within the 30 steps."""
    import contextlib
    import io

    torch.manual_seed(seed)
    hp = {"lr": 100.0, "scale": 1e11} if faulty else {"lr": 0.3, "scale": 1.0}
    with contextlib.redirect_stdout(io.StringIO()):  # the script prints every step
        losses: list[float] = _seed_module().train(out, steps=30, seed=seed, **hp)
    bad = [i for i, v in enumerate(losses) if not math.isfinite(v)]
    return RunLog(first_nonfinite=bad[0] if bad else None, train_losses=losses, global_steps=len(losses))


def vanishing_sigmoid(faulty: bool, seed: int, out: str) -> RunLog:
    """Adam, not SGD: with SGD lr 0.1 even the 2-layer twin sat near ln 4 for its first 25-45
    steps (a sigmoid net's plateau), a run that is not healthy from its start."""
    gen = _seeded(seed)
    data = gaussian_classes(gen, N_TRAIN, N_VAL)
    depth = 12 if faulty else 2
    model = MLP([16] + [32] * depth, "sigmoid", 4)
    return train(Plan(model, data, adam(3e-3)), out, seed)


def dead_relu(faulty: bool, seed: int, out: str) -> RunLog:
    gen = _seeded(seed)
    data = gaussian_classes(gen, N_TRAIN, N_VAL)
    model = MLP([16, 64, 64], "relu", 4)
    if faulty:
        with torch.no_grad():
            first: torch.nn.Linear = model.l00  # type: ignore[assignment]
            first.bias.fill_(-10.0)
    # lr 0.01: at 0.05 the twin reached its floor by step ~40 of 80 and then sat there
    return train(Plan(model, data, sgd(0.01)), out, seed)


def zero_init(faulty: bool, seed: int, out: str) -> RunLog:
    gen = _seeded(seed)
    data = gaussian_classes(gen, N_TRAIN, N_VAL)
    model = MLP([16, 64, 64], "relu", 4)
    if faulty:
        with torch.no_grad():
            for p in model.parameters():
                p.zero_()
    return train(Plan(model, data, adam(1e-3)), out, seed)


def poor_init(faulty: bool, seed: int, out: str) -> RunLog:
    """Weights drawn from N(0, 1) without fan-in scaling: activations grow ~32x per layer."""
    gen = _seeded(seed)
    data = gaussian_classes(gen, N_TRAIN, N_VAL)
    model = MLP([16, 64, 64, 64], "relu", 4)
    if faulty:
        with torch.no_grad():
            for p in model.parameters():
                if p.dim() > 1:
                    p.normal_(0.0, 1.0)
    return train(Plan(model, data, adam(1e-3)), out, seed)


def frozen_model(faulty: bool, seed: int, out: str) -> RunLog:
    """Every parameter left frozen (``requires_grad=False``): the loss only moves with the batch."""
    gen = _seeded(seed)
    data = gaussian_classes(gen, N_TRAIN, N_VAL)
    model = MLP([16, 64, 64], "relu", 4)
    if faulty:
        model.requires_grad_(False)
    return train(Plan(model, data, adam(1e-3)), out, seed)


def zero_lr(faulty: bool, seed: int, out: str) -> RunLog:
    """Learning rate 0 (a schedule decayed to nothing): gradients flow, weights never move."""
    gen = _seeded(seed)
    data = gaussian_classes(gen, N_TRAIN, N_VAL)
    model = MLP([16, 64, 64], "relu", 4)
    return train(Plan(model, data, adam(0.0 if faulty else 1e-3)), out, seed)


def overfit(faulty: bool, seed: int, out: str) -> RunLog:
    """16 training samples for a 64-256-256 MLP (healthy: the usual 16384), labels from a
    random teacher network so that the healthy twin is still learning when it ends; on
    separable Gaussians (sep 0.5) it reached its floor by step ~45 of 180 and sat there."""
    gen = _seeded(seed)
    data = teacher_classes(gen, 16 if faulty else N_TRAIN, N_VAL)
    model = MLP([64, 256, 256], "relu", 4)
    return train(Plan(model, data, adam(3e-4), steps=150, eval_every=5), out, seed)


def class_imbalance(faulty: bool, seed: int, out: str) -> RunLog:
    gen = _seeded(seed)
    probs = [0.91, 0.03, 0.03, 0.03] if faulty else None
    data = gaussian_classes(gen, N_TRAIN, N_VAL, probs=probs)
    model = MLP([16, 64, 64], "relu", 4)
    return train(Plan(model, data, adam(1e-3)), out, seed)


def saturated_tanh(faulty: bool, seed: int, out: str) -> RunLog:
    """Unnormalised features (raw pixel-like: x * 20 + 255) into a tanh MLP."""
    gen = _seeded(seed)
    scale, shift = (20.0, 255.0) if faulty else (1.0, 0.0)
    data = gaussian_classes(gen, N_TRAIN, N_VAL, scale=scale, shift=shift)
    model = MLP([16, 64, 64], "tanh", 4)
    return train(Plan(model, data, adam(1e-3)), out, seed)


FAULTS: tuple[Fault, ...] = (
    Fault("exploding_lr", ("ExplodingTensor",), "plain SGD lr 2 on a ReLU MLP regression (healthy: lr 0.01)",
          exploding_lr, first_nonfinite),
    Fault("seed_input_scale", ("ExplodingTensor",), "the seed: TF1 Adam lr=100, inputs x1e11 (healthy: lr 0.3, x1)",
          seed_input_scale, first_nonfinite),
    Fault("vanishing_sigmoid", ("VanishingGradient",), "12 sigmoid layers (healthy: 2), Adam lr 3e-3",
          vanishing_sigmoid, at_start),
    Fault("dead_relu", ("DeadRelu",), "first ReLU layer's bias set to -10 (SGD lr 0.01)",
          dead_relu, at_start),
    Fault("zero_init", ("AllZero", "PoorWeightInitialization"), "every parameter initialised to 0",
          zero_init, at_start),
    Fault("poor_init", ("PoorWeightInitialization",), "weights ~ N(0, 1), no fan-in scaling",
          poor_init, at_start),
    Fault("frozen_model", ("LossNotDecreasing",), "all parameters frozen", frozen_model, at_start),
    Fault("zero_lr", ("UnchangedTensor", "WeightUpdateRatio"), "Adam with lr 0", zero_lr, at_start),
    Fault("overfit", ("Overfit", "Overtraining"), "16 teacher-labelled samples (healthy: 16384), Adam 3e-4",
          overfit, val_minimum),
    Fault("class_imbalance", ("ClassImbalance",), "91 % of labels in one of 4 classes",
          class_imbalance, at_start),
    Fault("saturated_tanh", ("SaturatedActivation",), "unnormalised inputs (x*20+255) into tanh",
          saturated_tanh, at_start),
    # XGBoost (xgb_scenarios.py): xgboost.train runs recorded by murphy.hook.xgboost.
    Fault("xgb_leaky_feature", ("FeatureImportanceOverweight",), "XGBoost: a column = label + N(0, 0.1)",
          xgbs.leaky_feature, xgbs.at_start),
    Fault("xgb_shallow_trees", ("TreeDepth",), "XGBoost: gamma 40 (healthy: 0), max_depth 6",
          xgbs.shallow_trees, xgbs.at_start),
    Fault("xgb_frozen_booster", ("LossNotDecreasing",), "XGBoost: eta 0 (healthy: 0.1)",
          xgbs.frozen_booster, xgbs.at_start),
    Fault("xgb_memorising", ("Overfit", "Overtraining"), "XGBoost: 80 rows, 25 % flipped labels, depth 10, eta 0.5",
          xgbs.memorising, xgbs.val_minimum),
    Fault("xgb_class_imbalance", ("ClassImbalance",), "XGBoost: 99:1 labels (healthy: 50:50)",
          xgbs.imbalanced_labels, xgbs.at_start),
    Fault("xgb_noise_labels", ("Confusion",), "XGBoost: labels independent of the features",
          xgbs.noise_labels, xgbs.at_start),
)
