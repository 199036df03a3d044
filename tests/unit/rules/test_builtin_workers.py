"""Built-in rules read every worker of a multi-worker trial (a multi-instance job's ranks,
issue 17): an anomaly on one rank only is found at its own step, and the finding names it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from murphy.rules.builtin.all_zero import AllZero
from murphy.rules.builtin.exploding_tensor import ExplodingTensor
from murphy.rules.builtin.vanishing_gradient import VanishingGradient

from .test_builtin_a import healthy_step
from .trialkit import TrialKit, run_rule


def two_workers(tmp_path: Path, bad: dict[str, Any], at: int = 2, steps: int = 5) -> Any:
    """worker_0 healthy throughout; worker_1 healthy but for ``bad`` at step ``at``."""
    kits = [TrialKit(tmp_path / "trial", worker=w) for w in ("worker_0", "worker_1")]
    for s in range(steps):
        for i, kit in enumerate(kits):
            data = healthy_step(s + 100 * i)
            if i == 1 and s == at:
                data.update(bad)
            kit.step(s, data)
    return kits[0].end().trial()


@pytest.mark.parametrize(("rule", "bad"), [
    (ExplodingTensor, {"gradient/LinearRegression_weight": np.array([[np.nan, 0.1, 0.2, 0.3]])}),
    (AllZero, {"LinearRegression_weight": np.zeros((1, 4))}),
    (VanishingGradient, {"gradient/LinearRegression_weight": np.full((1, 4), 1e-12),
                         "gradient/LinearRegression_bias": np.full(1, 1e-12)}),
])
def test_an_anomaly_on_rank_1_only_is_found_at_its_step(tmp_path: Path, rule: Any, bad: dict[str, Any]) -> None:
    trial = two_workers(tmp_path, bad)
    assert trial.workers() == ["worker_0", "worker_1"]
    r = rule(trial)
    assert run_rule(r) == 2
    assert r.finding is not None and r.finding.step == 2 and "on worker_1" in r.finding.message, r.finding


def test_a_healthy_pair_of_workers_is_quiet_and_one_worker_reads_as_before(tmp_path: Path) -> None:
    assert run_rule(ExplodingTensor(two_workers(tmp_path / "a", {}))) is None
    kit = TrialKit(tmp_path / "b")
    kit.steps({s: healthy_step(s) for s in range(3)})
    kit.step(3, {**healthy_step(3), "LinearRegression_weight": np.array([[np.inf, 0, 0, 0]])})
    r = ExplodingTensor(kit.end().trial())
    assert run_rule(r) == 3 and r.finding is not None and " on worker" not in r.finding.message
