"""Rule-evaluation halves of the rule benchmarks; prints one JSON line.

``--impl smdebug`` runs under the smdebug 1.0.34 venv's python and never imports murphy: custom
rules written against smdebug's Rule API (what a SageMaker user writes for a custom rule)
driven by smdebug's own ``invoke_rule``. ``--impl murphy`` runs murphy's built-in rule classes
through ``murphy.rules.evaluate_rule``.

Modes:
- ``latency`` (smdebug only; murphy's side is the real ``murphy rule-eval`` CLI): wait for
  ExplodingTensor to fire on a live trial; ``--ready-file`` is created when the rule has
  evaluated step ``--ready-step`` (so the benchmark knows it is polling for the next one);
  ``detected`` = wall-clock time at which ``invoke_rule`` raised RuleEvaluationConditionMet.
- ``latency-loop``: the same for one trial per stdin line ``{"trial", "ready_file",
  "ready_step"}``, one JSON line out per trial, so smdebug's ~3 s import is paid once per store
  (each trial still gets its own ``create_trial`` and ``invoke_rule``).
- ``throughput``: evaluate ``--rule`` over a finished trial from step 0 to ``--end-step``;
  ``open_s`` = create_trial, ``eval_s`` = the evaluation.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))


def smdebug_rules() -> dict[str, Any]:
    """ExplodingTensor / VanishingGradient equivalents for smdebug's Rule API."""
    import numpy as np
    from smdebug.rules.rule import Rule

    class ExplodingTensorLike(Rule):  # type: ignore[misc]
        """Fires when any tensor saved at the step has a non-finite element."""

        def __init__(self, base_trial: Any, ready_file: str = "", ready_step: int = -1) -> None:
            super().__init__(base_trial, action_str="")
            self.ready_file, self.ready_step = ready_file, ready_step

        def invoke_at_step(self, step: int) -> bool:
            if self.ready_file and step == self.ready_step:
                Path(self.ready_file).touch()
            for name in self.base_trial.tensor_names(step=step):
                value = self.base_trial.tensor(name).value(step)
                if not np.isfinite(value).all():
                    return True
            return False

    class VanishingGradientLike(Rule):  # type: ignore[misc]
        """Fires when some gradient's mean(|g|) is below ``threshold`` (built-in default 1e-7)."""

        def __init__(self, base_trial: Any, threshold: float = 1e-7) -> None:
            super().__init__(base_trial, action_str="")
            self.threshold = float(threshold)

        def invoke_at_step(self, step: int) -> bool:
            for name in self.base_trial.tensor_names(step=step, collection="gradients"):
                t = self.base_trial.tensor(name)
                if t.reduction_value(step, "mean", abs=True) < self.threshold:
                    return True
            return False

    return {"exploding": ExplodingTensorLike, "vanishing": VanishingGradientLike}


def smdebug_latency(args: argparse.Namespace) -> dict[str, Any]:
    from smdebug.exceptions import RuleEvaluationConditionMet
    from smdebug.rules.rule_invoker import invoke_rule
    from smdebug.trials import create_trial

    trial = create_trial(args.trial)
    rule = args.rules["exploding"](trial, args.ready_file, args.ready_step)
    try:
        invoke_rule(rule, raise_eval_cond=True)
    except RuleEvaluationConditionMet as e:
        return {"detected": time.time(), "step": e.step}
    return {"detected": None, "step": None}


def throughput(args: argparse.Namespace) -> dict[str, Any]:
    t0 = time.perf_counter()
    if args.impl == "smdebug":
        from smdebug.exceptions import NoMoreData
        from smdebug.rules.rule_invoker import invoke_rule
        from smdebug.trials import create_trial

        t1 = time.perf_counter()
        trial = create_trial(args.trial)
        t2 = time.perf_counter()
        rule = smdebug_rules()[args.rule](trial)
        with contextlib.suppress(NoMoreData):  # smdebug's way of saying "past the last step"
            invoke_rule(rule, start_step=0, end_step=args.end_step)
        t3 = time.perf_counter()
        status, steps = "NoIssuesFound", args.end_step
    else:
        from murphy.rules import evaluate_rule
        from murphy.rules.builtin.exploding_tensor import ExplodingTensor
        from murphy.rules.builtin.vanishing_gradient import VanishingGradient
        from murphy.trial import create_trial as murphy_create_trial

        t1 = time.perf_counter()
        trial = murphy_create_trial(args.trial)
        t2 = time.perf_counter()
        cls = {"exploding": ExplodingTensor, "vanishing": VanishingGradient}[args.rule]
        out = evaluate_rule(cls(trial), 0, args.end_step)
        t3 = time.perf_counter()
        status, steps = out.status, out.steps_evaluated
    return {"impl": args.impl, "rule": args.rule, "import_s": t1 - t0, "open_s": t2 - t1,
            "eval_s": t3 - t2, "status": status, "steps": steps}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--impl", choices=["murphy", "smdebug"], required=True)
    ap.add_argument("--mode", choices=["latency", "latency-loop", "throughput"], required=True)
    ap.add_argument("--rule", choices=["exploding", "vanishing"], default="exploding")
    ap.add_argument("--end-step", type=int, default=None)
    ap.add_argument("--ready-file", default="")
    ap.add_argument("--ready-step", type=int, default=-1)
    ap.add_argument("--seaweedfs-workaround", action="store_true")
    ap.add_argument("--profile", help="write a cProfile of the run to this file")
    ap.add_argument("trial", nargs="?", default="")
    args = ap.parse_args()
    if args.seaweedfs_workaround:
        from _trial_read_worker import _seaweedfs_listing_workaround

        _seaweedfs_listing_workaround()
    if args.mode.startswith("latency"):
        if args.impl != "smdebug":
            sys.exit("latency modes are smdebug's side only (murphy's side is `murphy rule-eval`)")
        args.rules = smdebug_rules()
    if args.mode == "latency-loop":
        for line in sys.stdin:
            vars(args).update(json.loads(line))
            print(json.dumps(smdebug_latency(args)), flush=True)
        return
    fn = smdebug_latency if args.mode == "latency" else throughput
    if args.profile:
        import cProfile

        prof = cProfile.Profile()
        result = prof.runcall(fn, args)
        prof.dump_stats(args.profile)
    else:
        result = fn(args)
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
