"""The built-in rules' verdicts on TF-written runs (murphy's SessionHook): each faulty run makes
exactly the rules it should fire fire, at the step it goes wrong; the healthy run fires none."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import tf_harness as th

from murphy.rules import evaluate_rule
from murphy.rules.builtin.all_zero import AllZero
from murphy.rules.builtin.exploding_tensor import ExplodingTensor
from murphy.rules.builtin.loss_not_decreasing import LossNotDecreasing
from murphy.rules.builtin.unchanged_tensor import UnchangedTensor
from murphy.rules.builtin.vanishing_gradient import VanishingGradient
from murphy.rules.builtin.weight_update_ratio import WeightUpdateRatio
from murphy.trial import create_trial

pytestmark = pytest.mark.tf

RULES: dict[str, Any] = {
    "ExplodingTensor": ExplodingTensor,
    "VanishingGradient": VanishingGradient,
    "LossNotDecreasing": LossNotDecreasing,
    "WeightUpdateRatio": WeightUpdateRatio,
    "AllZero": AllZero,
    "UnchangedTensor": UnchangedTensor,
}
# run -> {rule: step it fires at}; every other rule: NoIssuesFound.
EXPECTED: dict[str, dict[str, int]] = {
    "healthy": {},
    # lr 0 on one batch: the loss stops decreasing (checked every 10 steps), the weights do not
    # move (update ratio 0 from step 1), and stay unchanged over 3 steps.
    "frozen": {"LossNotDecreasing": 10, "WeightUpdateRatio": 1, "UnchangedTensor": 2},
    # inputs x 1e-9: gradients ~1e-9 from the start, so nothing learns either.
    "tiny": {"VanishingGradient": 0, "LossNotDecreasing": 11, "WeightUpdateRatio": 1, "UnchangedTensor": 2},
    # zero weights, zero inputs: everything is zero (and so vanishing and unchanged).
    "zeros": {"AllZero": 0, "VanishingGradient": 0, "WeightUpdateRatio": 1, "UnchangedTensor": 2},
    # the article's run: NaN from step 2; Adam's first two updates are 0 (its v overflows).
    "seed": {"ExplodingTensor": 2, "WeightUpdateRatio": 1},
}


@pytest.mark.parametrize("run", sorted(EXPECTED))
def test_rule_verdicts_on_tf_runs(run: str, rule_runs: Path, seed_run: tuple[Path, str]) -> None:
    path = seed_run[0] if run == "seed" else rule_runs / run
    got = {}
    for name, cls in RULES.items():
        outcome = evaluate_rule(cls(create_trial(str(path))), poll_interval=0.01)
        got[name] = outcome.step if outcome.status == "IssuesFound" else outcome.status
    want = {name: EXPECTED[run].get(name, "NoIssuesFound") for name in RULES}
    assert got == want


def test_two_workers_are_read_identically(tf_python: str, tmp_path: Path, smdebug_python: str) -> None:
    """Two ranks (RANK/WORLD_SIZE, as a launcher sets them) with include_workers="all"."""
    out = tmp_path / "two"
    procs = [
        subprocess.Popen([tf_python, str(th.SIDE / "rule_runs.py"), str(out), "--worker"],
                         env=th.tf_env({"RANK": str(r), "WORLD_SIZE": "2"}), stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True)
        for r in range(2)
    ]
    for p in procs:
        log, _ = p.communicate(timeout=300)
        assert p.returncode == 0, log[-3000:]
    (out / "training_job_end.ts").write_bytes(b"")
    trial = create_trial(str(out))
    assert sorted(trial.workers()) == ["worker_0", "worker_1"] and trial.num_workers == 2
    assert sorted(trial.tensor("loss/loss:0").workers(0)) == ["worker_0", "worker_1"]
    assert th.same_reading(out, smdebug_python, skip=lambda k: k.endswith("|l2")) == []
