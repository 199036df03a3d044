"""The XGBoost rules on real XGBoost runs recorded by murphy's hook: each fault type of
benchmarks/rule_quality/xgb_scenarios.py makes its rule(s) fire, and none of the XGBoost rules
fires on any healthy twin (one seed here; the benchmark runs three)."""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path
from typing import Any

import pytest

if os.environ.get("CI"):
    import xgboost  # noqa: F401
else:
    pytest.importorskip("xgboost")

from murphy.rules.engine import evaluate_rule
from murphy.rules.registry import lookup
from murphy.trial import create_trial

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from rule_quality import xgb_scenarios as xs

pytestmark = pytest.mark.slow
RULES = ("TreeDepth", "FeatureImportanceOverweight", "LossNotDecreasing", "Overfit", "Overtraining",
         "ClassImbalance", "Confusion")
CASES: list[tuple[Any, tuple[str, ...]]] = [
    (xs.leaky_feature, ("FeatureImportanceOverweight",)),
    (xs.shallow_trees, ("TreeDepth",)),
    (xs.frozen_booster, ("LossNotDecreasing",)),
    (xs.memorising, ("Overfit", "Overtraining")),
    (xs.imbalanced_labels, ("ClassImbalance",)),
    (xs.noise_labels, ("Confusion",)),
]


def _fired(run_dir: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for name in RULES:
        outcome = evaluate_rule(lookup(name)(create_trial(run_dir)), poll_interval=0.01, idle_timeout=5.0)
        assert outcome.status != "Error", f"{name}: {outcome.reason}"
        if outcome.status == "IssuesFound":
            out[name] = outcome.message
    return out


@pytest.fixture(autouse=True)
def _quiet_hook() -> None:
    logging.getLogger("murphy.hook").setLevel(logging.ERROR)


@pytest.mark.parametrize(("scenario", "rules"), CASES, ids=[c[0].__name__ for c in CASES])
def test_fault_fires_and_healthy_twin_stays_silent(scenario: Any, rules: tuple[str, ...], tmp_path: Path) -> None:
    scenario(True, 1000, str(tmp_path / "fault"))
    scenario(False, 1000, str(tmp_path / "healthy"))
    fired = _fired(str(tmp_path / "fault"))
    for rule in rules:
        assert rule in fired, f"{rule} did not fire on {scenario.__name__}; fired: {sorted(fired)}"
    assert _fired(str(tmp_path / "healthy")) == {}


def test_overfit_message_names_the_metric_pair(tmp_path: Path) -> None:
    xs.memorising(True, 1001, str(tmp_path / "run"))
    outcome = evaluate_rule(lookup("Overfit")(create_trial(str(tmp_path / "run"))), poll_interval=0.01, idle_timeout=5.0)
    assert outcome.status == "IssuesFound"
    assert "validation-logloss" in outcome.message and "train-logloss" in outcome.message
