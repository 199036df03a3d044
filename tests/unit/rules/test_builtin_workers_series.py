"""Every built-in series rule reads every worker of a 2-worker trial (issue 17 §1): a fault on
worker_1 only is found and named, and a healthy pair of workers whose series differ (their own
data shards, their own loss levels) stays quiet: no worker's series is mixed into another's."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from murphy.core.modes import ModeKeys
from murphy.rules.builtin.all_zero import AllZero
from murphy.rules.builtin.check_input_images import CheckInputImages
from murphy.rules.builtin.class_imbalance import ClassImbalance
from murphy.rules.builtin.confusion import Confusion
from murphy.rules.builtin.create_xgboost_report import CreateXgboostReport
from murphy.rules.builtin.dead_relu import DeadRelu
from murphy.rules.builtin.exploding_tensor import ExplodingTensor
from murphy.rules.builtin.feature_importance_overweight import FeatureImportanceOverweight
from murphy.rules.builtin.loss_not_decreasing import LossNotDecreasing
from murphy.rules.builtin.nlp_sequence_ratio import NLPSequenceRatio
from murphy.rules.builtin.overfit import Overfit
from murphy.rules.builtin.overtraining import Overtraining
from murphy.rules.builtin.poor_weight_initialization import PoorWeightInitialization
from murphy.rules.builtin.saturated_activation import SaturatedActivation
from murphy.rules.builtin.similar_across_runs import SimilarAcrossRuns
from murphy.rules.builtin.stalled_training_rule import StalledTrainingRule
from murphy.rules.builtin.tensor_variance import TensorVariance
from murphy.rules.builtin.tree_depth import TreeDepth
from murphy.rules.builtin.unchanged_tensor import UnchangedTensor
from murphy.rules.builtin.vanishing_gradient import VanishingGradient
from murphy.rules.builtin.weight_update_ratio import WeightUpdateRatio
from murphy.rules.engine import evaluate_rule
from murphy.rules.registry import BUILTIN_RULE_NAMES
from murphy.tensorio.writer import StepWriter

from .trialkit import TrialKit, run_rule, write_workers

Array = np.ndarray[Any, Any]
Series = dict[int, dict[str, Any]]
LOSS = "CrossEntropyLoss_output_0"


def fired_on_worker_1(rule: Any, at: int | None = None) -> None:
    step = run_rule(rule)
    assert step is not None, f"{rule.rule_name} missed the fault on worker_1"
    assert at is None or step == at, (step, rule.finding)
    f = rule.finding
    assert f is not None and f.step == step and "on worker_1" in f.message and "worker_0" not in f.message, f


# ---- per-rule scenarios: (healthy worker_0, healthy worker_1, faulty worker_1, modes) ----------


def losses(values: list[float]) -> Series:
    return {s: {LOSS: v} for s, v in enumerate(values)}


def train_eval(train: list[float], val: list[float]) -> tuple[Series, dict[int, ModeKeys]]:
    """One TRAIN then one EVAL save per epoch."""
    data: Series = {}
    modes: dict[int, ModeKeys] = {}
    for e, (t, v) in enumerate(zip(train, val, strict=True)):
        data[2 * e], modes[2 * e] = {LOSS: t}, ModeKeys.TRAIN
        data[2 * e + 1], modes[2 * e + 1] = {LOSS: v}, ModeKeys.EVAL
    return data, modes


def weights(updates: dict[int, float], seed: int, steps: int = 8) -> Series:
    """A weight updated by a relative ``1e-3`` per step (``updates[s]`` at step s)."""
    w = np.random.default_rng(seed).standard_normal((4, 4)) + 3
    out: Series = {}
    for s in range(steps):
        w = w + updates.get(s, 1e-3) * np.linalg.norm(w) / 4 * np.eye(4)
        out[s] = {"fc_weight": w.copy()}
    return out


def batches(seed: int, fn: Callable[[int, np.random.Generator], dict[str, Any]], steps: int = 8) -> Series:
    rng = np.random.default_rng(seed)
    return {s: fn(s, rng) for s in range(steps)}


def labelled(skew: bool, wrong: int | None = None) -> Callable[[int, np.random.Generator], dict[str, Any]]:
    def step(s: int, rng: np.random.Generator) -> dict[str, Any]:
        lab = np.array([0] * 95 + [1] * 5) if skew else rng.permutation(np.repeat(np.arange(3), 34))[:100]
        pred = lab.copy()
        if wrong is not None and s >= wrong:
            pred[lab == 0] = 1
        return {"labels": lab.astype(np.int64), "predictions": pred.astype(np.int64)}
    return step


def images(mean: float) -> Callable[[int, np.random.Generator], dict[str, Any]]:
    return lambda s, rng: {"hybridsequential0_input_0": (rng.standard_normal((100, 3, 8, 8)) * 0.5 + mean).astype(np.float32)}


def sequences(pad: float, at: int | None = None) -> Callable[[int, np.random.Generator], dict[str, Any]]:
    def step(s: int, rng: np.random.Generator) -> dict[str, Any]:
        seq = rng.integers(1, 1000, (8, 50))
        seq[:, int(50 * (1 - (pad if at is None or s == at else 0.2))):] = 0
        return {"embedding0_input_0": seq.astype(np.int64)}
    return step


def importances(w: list[float]) -> dict[str, Any]:
    return {f"feature_importance/weight/f{i}": np.float64(x / sum(w)) for i, x in enumerate(w)}


def tree(depth: int, t: int) -> dict[str, Any]:
    nodes = np.arange(2 ** (depth + 1) - 1, dtype=np.int64)
    return {"trees/Tree": np.full(nodes.size, t, dtype=np.int64), "trees/Node": nodes}


def relu_inputs(scales: list[float], loss: Callable[[int], float]) -> Callable[[int, np.random.Generator], dict[str, Any]]:
    def step(s: int, rng: np.random.Generator) -> dict[str, Any]:
        out: dict[str, Any] = {f"fc{i}_relu_input": rng.standard_normal((16, 8)) * sc for i, sc in enumerate(scales)}
        out["gradient/fc0_weight"] = rng.standard_normal((8, 8)) * 0.1
        out["NLLLoss_output_0"] = loss(s)
        return out
    return step


falling = [2.0 * 0.9 ** s for s in range(30)]
train_ok = [1.0 - 0.05 * e for e in range(14)]
val_ok = [t * 1.05 for t in train_ok]
Scenario = tuple[Callable[[Any], Any], Series, Series, Series, dict[int, ModeKeys] | None, int | None]


def acts(seed: int, bad_at: int | None = None, scale: float = 1.0) -> Series:
    """A layer's tensors, in write order: tanh input, ReLU output, a gradient; worker-specific."""
    rng = np.random.default_rng(seed)
    out: Series = {}
    for s in range(6):
        bad = s == bad_at
        out[s] = {"l0_tanh_input_0": rng.standard_normal((16, 8)) + (100.0 if bad and scale == 100 else 0.0),
                  "l0_relu_output_0": np.maximum(rng.standard_normal((16, 8)) - (10.0 if bad and scale == 10 else 0.0), 0),
                  "gradient/l0_weight": rng.standard_normal((8, 8)) * (1e-12 if bad and scale == 0 else 0.1)}
    return out


def scenarios() -> dict[str, Scenario]:
    h0, modes = train_eval(train_ok, val_ok)
    h1, _ = train_eval([t * 0.8 for t in train_ok], [v * 0.8 for v in val_ok])
    overfit, _ = train_eval([t * 0.8 for t in train_ok], [0.85, 0.7, 0.6, 0.6, 0.7, 0.8, 0.9, 1.0, 1.1, 1.2,
                                                          1.3, 1.4, 1.5, 1.6])
    flat, _ = train_eval([1.0, 0.8, 0.6] + [0.5] * 11, [0.5] * 14)
    pwi_ok = relu_inputs([1.0, 1.2], lambda s: 2.0 - 0.1 * s)
    nan = {**weights({}, 1), 6: {"fc_weight": np.full((4, 4), np.nan)}}
    zeros = {**weights({}, 1), 6: {"fc_weight": np.zeros((4, 4))}}
    return {
        # the per-step rules (each worker's value at the step; test_builtin_workers.py)
        "ExplodingTensor": (ExplodingTensor, weights({}, 0), weights({}, 1), nan, None, 6),
        "AllZero": (lambda t: AllZero(t, collection_names="weights"), weights({}, 0), weights({}, 1), zeros, None, 6),
        "VanishingGradient": (VanishingGradient, acts(0), acts(1), acts(1, 3, 0), None, 3),
        "DeadRelu": (DeadRelu, acts(0), acts(1), acts(1, 3, 10), None, 3),
        "SaturatedActivation": (SaturatedActivation, acts(0), acts(1), acts(1, 3, 100), None, 3),
        # a worker_1 loss that stops falling; healthy workers at different levels (2x apart)
        "LossNotDecreasing": (LossNotDecreasing, losses(falling), losses([x / 2 for x in falling]),
                              losses(falling[:5] + [falling[4]] * 25), None, 20),
        "Overfit": (Overfit, h0, h1, overfit, modes, 11),
        "Overtraining": (lambda t: Overtraining(t, patience_validation="20"), h0, h1, flat, modes, 24),
        "WeightUpdateRatio": (WeightUpdateRatio, weights({}, 0), weights({}, 1), weights({5: 100.0}, 1), None, 5),
        "UnchangedTensor": (lambda t: UnchangedTensor(t, collection_names="weights"), weights({}, 0),
                            weights({}, 1), weights({3: 0.0, 4: 0.0}, 1), None, 4),
        "TensorVariance": (lambda t: TensorVariance(t, max_threshold="100"), weights({}, 0), weights({}, 1),
                           {**weights({}, 1), 6: {"fc_weight": np.eye(4) * 100}}, None, 6),
        "PoorWeightInitialization": (PoorWeightInitialization, batches(0, pwi_ok), batches(1, pwi_ok),
                                     batches(1, relu_inputs([1.0, 10.0], lambda s: 2.0 - 0.1 * s)), None, 0),
        "ClassImbalance": (ClassImbalance, batches(0, labelled(False)), batches(1, labelled(False)),
                           batches(1, labelled(True)), None, 4),
        "Confusion": (Confusion, batches(0, labelled(False)), batches(1, labelled(False)),
                      batches(1, labelled(False, wrong=3)), None, 3),
        "CheckInputImages": (CheckInputImages, batches(0, images(0.0)), batches(1, images(0.0)),
                             batches(1, images(0.45)), None, 4),
        "NLPSequenceRatio": (NLPSequenceRatio, batches(0, sequences(0.2)), batches(1, sequences(0.2)),
                             batches(1, sequences(0.6, at=3)), None, 3),
        "FeatureImportanceOverweight": (FeatureImportanceOverweight, {s: importances([1.0] * 8) for s in range(3)},
                                        {s: importances([1.0] * 8) for s in range(3)},
                                        {0: importances([1.0] * 8), 1: importances([1.0] * 8),
                                         2: importances([10.0, 5.0, 3.0, 0.5, 0.5, 0.5, 0.5])}, None, 2),
        "TreeDepth": (TreeDepth, {s: tree(6, s) for s in range(4)}, {s: tree(6, s) for s in range(4)},
                      {0: tree(6, 0), 1: tree(5, 1), 2: tree(3, 2), 3: tree(2, 3)}, None, 2),
    }


SCENARIOS = scenarios()
# Built-ins tested below on their own: they compare runs, watch time, or write a report.
OWN_TESTS = {"SimilarAcrossRuns", "StalledTrainingRule", "CreateXgboostReport"}


def test_every_built_in_rule_is_tested_on_two_workers() -> None:
    assert set(SCENARIOS) | OWN_TESTS == set(BUILTIN_RULE_NAMES)


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_a_fault_on_worker_1_only_is_found_and_named(name: str) -> None:
    make, h0, _, bad1, modes, at = SCENARIOS[name]
    trial = write_workers([h0, bad1], modes=modes)
    assert trial.workers() == ["worker_0", "worker_1"]
    fired_on_worker_1(make(trial), at)


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_a_healthy_pair_of_different_workers_is_quiet(name: str) -> None:
    make, h0, h1, _, modes, _ = SCENARIOS[name]
    rule = make(write_workers([h0, h1], modes=modes))
    assert run_rule(rule) is None, rule.finding


def test_interleaving_two_healthy_loss_curves_would_have_fired() -> None:
    # Why per-worker series: the two healthy curves of the LossNotDecreasing scenario read as one
    # series (worker_0's save, then worker_1's, one curve) zigzag between two levels 2x apart;
    # with an odd window (5) the rule compares the levels and fires. Per worker it does not.
    _, h0, h1, _, _, _ = SCENARIOS["LossNotDecreasing"]
    mixed = {2 * s + i: d[s] for s in h0 for i, d in enumerate((h0, h1))}
    assert run_rule(LossNotDecreasing(write_workers([mixed]), num_steps="5")) is not None
    assert run_rule(LossNotDecreasing(write_workers([h0, h1]), num_steps="5")) is None


def test_a_step_only_worker_0_wrote_is_not_evaluated_until_worker_1_writes_it(tmp_path: Any) -> None:
    # Live trial: worker_0 is ahead (steps 0-24) of worker_1 (0-19); worker_1's loss is flat
    # from step 4, which the check at step 20 finds. Only steps both wrote are complete: step 20
    # is not evaluated (and worker_1's series has no step 20) until worker_1 writes it.
    h0 = losses(falling[:25])
    bad1 = losses(falling[:5] + [falling[4]] * 25)
    trial = write_workers([h0, {s: bad1[s] for s in range(20)}], where=tmp_path, end=False)
    assert trial.steps() == list(range(20))
    rule = LossNotDecreasing(trial)
    assert run_rule(rule) is None
    # worker_1 catches up: steps 20-24 become complete and the same rule finds the fault.
    write_workers([{}, {s: bad1[s] for s in range(20, 25)}], where=tmp_path, end=False)
    trial.refresh()
    assert trial.steps() == list(range(25))
    fired_on_worker_1(rule, 20)


def test_similar_across_runs_compares_each_worker_with_the_same_worker(tmp_path: Any) -> None:
    def run(seed: int, shift_at: int | None = None) -> Series:
        rng = np.random.default_rng(seed)
        out: Series = {}
        for s in range(4):
            g = rng.standard_normal((3, 3)).astype(np.float32)
            out[s] = {"gradient/fc.weight": g + (0.5 if shift_at is not None and s >= shift_at else 0.0)}
        return out

    base = write_workers([run(0), run(1)])
    # The same two workers again: quiet (worker_1 is not compared with worker_0's shard).
    assert run_rule(SimilarAcrossRuns(base, other_trials=[write_workers([run(0), run(1)])])) is None
    rule = SimilarAcrossRuns(base, other_trials=[write_workers([run(0), run(1, shift_at=2)])])
    fired_on_worker_1(rule, 2)
    assert rule.finding is not None and rule.finding.value == pytest.approx(0.5, rel=1e-5)
    # A one-worker other run: worker_0 is compared, worker_1 has no counterpart.
    assert run_rule(SimilarAcrossRuns(base, other_trials=[write_workers([run(0)])])) is None
    # The other trial passed positionally (smdebug's two signatures), or opened from its path.
    shifted = write_workers([run(0), run(1, shift_at=2)], where=tmp_path / "other")
    for rule in (SimilarAcrossRuns(base, "", [shifted]), SimilarAcrossRuns(base, [shifted]),
                 SimilarAcrossRuns(base, other_trial_0=str(tmp_path / "other"))):
        fired_on_worker_1(rule, 2)


def test_a_subclass_with_its_own_signature_gets_per_worker_copies() -> None:
    class Strict(LossNotDecreasing):
        def __init__(self, trial: Any, percent: str) -> None:
            super().__init__(trial, diff_percent=percent)

    _, h0, _, bad1, _, _ = SCENARIOS["LossNotDecreasing"]
    fired_on_worker_1(Strict(write_workers([h0, bad1]), "0.1"), 20)


# ---- StalledTrainingRule: each worker's own progress ------------------------------------------

T0 = 1_700_000_000.0


def _write_step(store: Any, step: int, worker: str) -> None:
    with StepWriter(store, step, worker) as w:
        w.add("loss_output_0", np.float32(1.0 / (step + 1)), wall_time=T0 + 10 * step)


@pytest.mark.parametrize("hung", [False, True])
def test_stalled_training_watches_each_worker(hung: bool) -> None:
    # worker_1 hangs after step 1 while worker_0 keeps writing (incomplete steps 2-5): a stall
    # of worker_1, although the trial as a whole still sees new data on every tick.
    kit0 = TrialKit(num_workers=2)
    TrialKit(kit0.store, worker="worker_1", num_workers=2)
    for s in range(6):
        _write_step(kit0.store, s, "worker_0")
        if not hung or s < 2:
            _write_step(kit0.store, s, "worker_1")
    trial = kit0.trial()
    rule = StalledTrainingRule(trial, threshold="100", clock=lambda: T0 + 60)
    assert run_rule(rule) is None
    assert trial.steps() == (list(range(2)) if hung else list(range(6)))
    assert not rule.check_stalled(T0 + 60)  # first tick: worker_0's newer data is progress
    stalled = rule.check_stalled(T0 + 10 + 101)  # 101 s after worker_1's step 1
    assert stalled is hung
    if hung:
        f = rule.finding
        assert f is not None and f.step == 1 and "on worker_1" in f.message and "after step 1" in f.message, f


# ---- single-series cases -----------------------------------------------------------------------


@pytest.mark.parametrize("flat", [False, True])
def test_a_loss_only_rank_0_saves_is_judged_on_rank_0(flat: bool) -> None:
    # worker_1 saves weights only (a script that logs the loss on rank 0): its copy of the rule
    # has no loss to judge, worker_0's judges the loss alone, and a finding names worker_0.
    loss = falling[:5] + [falling[4]] * 25 if flat else falling
    trial = write_workers([{s: {LOSS: v, **weights({}, 0)[s % 8]} for s, v in enumerate(loss)},
                           {s: weights({}, 1)[s % 8] for s in range(30)}])
    rule = LossNotDecreasing(trial)
    step = run_rule(rule)
    if not flat:
        assert step is None, rule.finding
        return
    assert step == 20 and rule.finding is not None and "on worker_0" in rule.finding.message, rule.finding


def test_the_xgboost_report_describes_worker_0_of_a_multi_worker_job() -> None:
    # Distributed XGBoost: every worker holds the same model and allreduced metrics. The report
    # is worker_0's (one line per metric, not one per worker), and says so.
    def rounds(offset: float) -> Series:
        return {s: {"train-rmse": np.float64(1.0 / (s + 1) + offset), **tree(3, s)} for s in range(4)}

    single = CreateXgboostReport(write_workers([rounds(0.0)]))
    assert run_rule(single) is None and single.worker is None and "rank 0" not in single.html
    rule = CreateXgboostReport(write_workers([rounds(0.0), rounds(0.5)]))
    assert run_rule(rule) is None
    assert rule.worker == "worker_0" and rule.reports_written == 4
    assert rule.metrics == {"train-rmse": [(s, pytest.approx(1.0 / (s + 1))) for s in range(4)]}
    assert rule.depths == [(s, 3.0) for s in range(4)]
    assert "Worker worker_0 (rank 0)" in rule.html


def test_the_engine_on_a_live_two_worker_job_evaluates_complete_steps_only(tmp_path: Any) -> None:
    # worker_0 writes every 10 ms, worker_1 (flat loss from step 4) every 40 ms: the engine must
    # evaluate each step only once worker_1 has written it too, and find the fault at step 20.
    kits = [TrialKit(tmp_path, worker=f"worker_{i}", num_workers=2) for i in range(2)]
    series = [losses(falling), losses(falling[:5] + [falling[4]] * 25)]
    started = [-1, -1]  # per worker, the step it has begun writing (an upper bound of what is there)

    def write(i: int, period: float) -> None:
        for s in sorted(series[i]):
            started[i] = s
            kits[i].step(s, series[i][s])
            time.sleep(period)

    threads = [threading.Thread(target=write, args=(i, p), daemon=True) for i, p in enumerate((0.01, 0.04))]
    evaluated: list[tuple[int | None, int]] = []
    rule = LossNotDecreasing(kits[0].trial(poll_interval=0.01))
    for t in threads:
        t.start()
    out = evaluate_rule(rule, poll_interval=0.01, idle_timeout=30,
                        progress=lambda last, n: evaluated.append((last, min(started))))
    for t in threads:
        t.join()
    assert (out.status, out.step) == ("IssuesFound", 20) and "on worker_1" in out.message, out
    assert evaluated and all(last is None or last <= lowest for last, lowest in evaluated), evaluated
