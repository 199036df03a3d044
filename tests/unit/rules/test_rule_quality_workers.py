"""benchmarks/rule_quality/workers.py: two one-worker runs composed into one 2-worker trial in
smdebug's format, read back by the trial and judged by a rule per worker."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from murphy.rules.builtin.loss_not_decreasing import LossNotDecreasing
from murphy.rules.builtin.weight_update_ratio import WeightUpdateRatio
from murphy.trial import create_trial

from .trialkit import run_rule, write_trial

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))
from rule_quality.evaluate import Verdict
from rule_quality.workers import attribute, merge_workers


def test_two_runs_become_the_workers_of_one_trial(tmp_path: Path) -> None:
    falling = [2.0 * 0.9 ** s for s in range(25)]
    flat = falling[:5] + [falling[4]] * 20
    write_trial({s: {"MSELoss_output_0": v, "fc_weight": np.full(3, 10.0 + 0.01 * s)} for s, v in enumerate(falling)},
                where=tmp_path / "healthy")
    write_trial({s: {"MSELoss_output_0": v, "fc_weight": np.full(3, 10.0 + 0.01 * s)} for s, v in enumerate(flat)},
                where=tmp_path / "faulty")
    merge_workers(tmp_path / "pair", [tmp_path / "healthy", tmp_path / "faulty"])
    trial = create_trial(str(tmp_path / "pair"))
    assert trial.workers() == ["worker_0", "worker_1"] and trial.num_workers == 2
    assert trial.steps() == list(range(25)) and trial.loaded_all_steps
    loss = trial.tensor("MSELoss_output_0")
    assert loss.workers(10) == ["worker_0", "worker_1"]
    assert loss.value(10, worker="worker_1") == np.float32(flat[10])
    assert loss.value(10, worker="worker_0") == np.float32(falling[10])
    rule = LossNotDecreasing(trial)
    assert run_rule(rule) == 20 and rule.finding is not None and "on worker_1" in rule.finding.message
    assert run_rule(WeightUpdateRatio(trial)) is None


def test_only_findings_naming_worker_1_count_on_a_faulty_pair() -> None:
    verdicts = [Verdict("A", True, True, 3, "A on worker_1: x"), Verdict("B", True, True, 5, "B on worker_0: y"),
                Verdict("C", True, False)]
    kept, wrong = attribute(verdicts, faulty=True)
    assert [v.fired for v in kept] == [True, False, False] and wrong == ["B@5: B on worker_0: y"]
    assert attribute(verdicts, faulty=False) == (verdicts, [])
