"""murphy offers no MXNet hook (docs/mxnet.md), but reads MXNet runs that smdebug's MXNet hook
wrote: a fixture built from the format (Gluon names, smdebug's MXNet collections, TRAIN and EVAL
steps) is read by murphy's trial as smdebug's trial reads it, and the built-in rules judge it."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from murphy.core.modes import ModeKeys
from murphy.rules.engine import evaluate_rule
from murphy.rules.registry import lookup
from murphy.trial import create_trial

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit" / "rules"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "compat"))
from trialkit import TrialKit

# smdebug/mxnet/collection.py's regexes.
MXNET_COLLECTIONS = {
    "weights": ["^(?!gradient).*weight"],
    "biases": ["^(?!gradient).*bias"],
    "gradients": ["^gradient"],
    "losses": [".*loss._(?!input).*output"],
}
NET = "hybridsequential0"
WEIGHTS = [f"{NET}_dense0_weight", f"{NET}_dense1_weight"]
BIASES = [f"{NET}_dense0_bias", f"{NET}_dense1_bias"]
LOSS = "softmaxcrossentropyloss0_output_0"
EPOCHS = 12


def _write(root: Path, *, grad_scale: float = 0.1, decay: float = 0.97, nan_at: int | None = None) -> None:
    rng = np.random.default_rng(0)
    kit = TrialKit(root, collections=MXNET_COLLECTIONS)
    shapes = {WEIGHTS[0]: (16, 8), WEIGHTS[1]: (4, 16), BIASES[0]: (16,), BIASES[1]: (4,)}
    params = {n: rng.normal(scale=0.3, size=s).astype(np.float32) for n, s in shapes.items()}
    step = 0
    for _epoch in range(EPOCHS):
        for _ in range(8):  # TRAIN: parameters, gradients, the batch's losses (Gluon: one per sample)
            data: dict[str, Any] = {}
            for n, v in params.items():
                g = (grad_scale * rng.normal(size=v.shape)).astype(np.float32)
                params[n] = v - 0.1 * g
                data[n] = params[n].copy()
                data[f"gradient/{n}"] = g
            if nan_at is not None and step >= nan_at:
                data[WEIGHTS[0]][0, 0] = np.nan
            loss = 1.5 * decay**step * (1 + 0.02 * rng.normal(size=32))
            data[LOSS] = loss.astype(np.float32)
            kit.step(step, data, mode=ModeKeys.TRAIN)
            step += 1
        kit.step(step, {LOSS: np.full(32, 1.5 * decay**step, dtype=np.float32)}, mode=ModeKeys.EVAL)
        step += 1
    kit.end()


def _verdict(rule: str, root: Path) -> str:
    outcome = evaluate_rule(lookup(rule)(create_trial(str(root))), poll_interval=0.01, idle_timeout=5.0)
    assert outcome.status != "Error", outcome.reason
    return outcome.status


def test_murphy_reads_gluon_names_collections_and_modes(tmp_path: Path) -> None:
    _write(tmp_path / "run")
    trial = create_trial(str(tmp_path / "run"))
    assert trial.tensor_names(collection="weights") == sorted(WEIGHTS)
    assert trial.tensor_names(collection="biases") == sorted(BIASES)
    assert trial.tensor_names(collection="gradients") == sorted(f"gradient/{n}" for n in WEIGHTS + BIASES)
    assert trial.tensor_names(collection="losses") == [LOSS]
    assert trial.steps(mode=ModeKeys.TRAIN) == list(range(8 * EPOCHS))
    assert trial.steps(mode=ModeKeys.EVAL) == list(range(EPOCHS))
    assert trial.global_step(ModeKeys.EVAL, 1) == 17
    assert trial.tensor(WEIGHTS[0]).value(3).shape == (16, 8)
    assert trial.tensor(f"gradient/{WEIGHTS[0]}").value(3).dtype == np.float32
    assert trial.tensor(LOSS).value(1, mode=ModeKeys.EVAL).shape == (32,)


@pytest.mark.parametrize(
    ("rule", "fault"),
    [
        ("VanishingGradient", {"grad_scale": 1e-9}),
        ("LossNotDecreasing", {"decay": 1.0}),
        ("ExplodingTensor", {"nan_at": 5}),
    ],
)
def test_rules_judge_mxnet_runs(tmp_path: Path, rule: str, fault: dict[str, Any]) -> None:
    _write(tmp_path / "healthy")
    _write(tmp_path / "fault", **fault)
    assert _verdict(rule, tmp_path / "fault") == "IssuesFound"
    assert _verdict(rule, tmp_path / "healthy") == "NoIssuesFound"


@pytest.mark.compat
def test_smdebug_reads_the_fixture_as_murphy_does(tmp_path: Path) -> None:
    """The fixture is smdebug's format: smdebug 1.0.34's own trial reads it the same way."""
    venv = os.environ.get("MURPHY_SMDEBUG_VENV")
    if not venv and not os.environ.get("CI"):
        pytest.skip("MURPHY_SMDEBUG_VENV is not set (CI builds the venv)")
    import compat_harness as h
    import trial_dump

    python = h.ensure_smdebug_venv()
    _write(tmp_path / "run")
    dumps = {side: h.dump(side, python if side == "smdebug" else sys.executable, str(tmp_path / "run"),
                          tmp_path / f"dump-{side}", h.clean_env()) for side in ("smdebug", "murphy")}
    # Except the l2 norm computed from a raw 2-D tensor: smdebug's numpy ``norm(x, ord=2)`` is
    # the spectral norm of a matrix, murphy's the vector norm (as stored by the hook).
    assert trial_dump.compare(dumps["smdebug"], dumps["murphy"], value_filter=lambda k: not k.endswith("|l2")) == []
