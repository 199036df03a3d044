"""Series rules over every worker of a multi-worker trial: one copy of the rule per worker.

A multi-instance job (issue 17) writes one series per rank into one trial. Rules that keep
state across steps (a loss window, a running label count, the previous weight) must keep it per
worker: interleaving two healthy ranks' losses makes a curve that rises at every other save,
and pooling a faulty rank with healthy ones dilutes its fault. :class:`EveryWorker` runs the
rule's own logic once per worker, each copy constructed with the rule's own arguments but
reading a :class:`~murphy.trial.worker_view.WorkerView` (that worker's steps and values only),
so its state is that worker's alone. With one worker the rule runs as it always did, on the
trial itself.

Steps: the engine hands a rule complete steps only (every worker that writes the step has
written it); at such a step each worker that wrote it is evaluated, in name order, and every
one of them is (so no copy misses a step of its series because another fired first). The
finding is the first firing worker's, its message naming the worker (``LossNotDecreasing on
worker_1: ...``).
"""

from __future__ import annotations

from typing import Any

from murphy.exceptions import StepUnavailable, TensorUnavailable, TensorUnavailableForStep
from murphy.rules.rule import Finding, Rule
from murphy.trial.trial import Trial
from murphy.trial.worker_view import WorkerView

# Lookup errors a worker's copy may raise at a step; the step is skipped for that worker.
LOOKUP_ERRORS = (TensorUnavailableForStep, TensorUnavailable, StepUnavailable)


def worker_label(message: str, rule_name: str, worker: str) -> str:
    """``message`` naming ``worker``: after the rule's name when it starts with it."""
    prefix = f"{rule_name}: "
    if message.startswith(prefix):
        return f"{rule_name} on {worker}: {message[len(prefix):]}"
    return f"on {worker}: {message}"


def series_workers(trial: Any) -> list[str]:
    """The workers whose series are read apart, sorted: those of a murphy trial with more than
    one; [] for one worker, a worker's view already, or another reader's trial (read as is)."""
    if not isinstance(trial, Trial):
        return []
    workers = list(trial.workers())
    return workers if len(workers) > 1 else []


def view_of(trial: Any, worker: str) -> Any:
    """``trial`` as ``worker`` wrote it (a trial that is not murphy's is returned as is)."""
    return WorkerView(trial, worker) if isinstance(trial, Trial) else trial


class EveryWorker(Rule):
    """Base of the built-in rules that judge one series per worker (see the module docstring).

    A subclass implements :meth:`invoke_worker_step` (the single-series logic, reading
    ``self.base_trial`` as usual) instead of ``invoke_at_step``.
    """

    _ctor: tuple[tuple[Any, ...], dict[str, Any]]
    _per_worker: dict[str, EveryWorker]

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        # The arguments are kept to build each worker's copy exactly as the rule was built.
        self = super().__new__(cls)
        self._ctor = (args, dict(kwargs))
        self._per_worker = {}
        return self

    def invoke_worker_step(self, step: int) -> bool:
        """True when the rule's condition holds at ``step`` for the (one) worker it reads."""
        raise NotImplementedError

    def _workers(self) -> list[str]:
        return series_workers(self.base_trial)

    def _copy_for(self, worker: str) -> EveryWorker:
        rule = self._per_worker.get(worker)
        if rule is None:
            args, kwargs = list(self._ctor[0]), dict(self._ctor[1])
            view = WorkerView(self.base_trial, worker)
            if "base_trial" in kwargs:
                kwargs["base_trial"] = view
            else:
                args[0] = view
            if self.other_trials:
                # The same worker of each other trial (opened ones too: a copy must not reopen
                # them from their paths). other_trials may have come positionally (smdebug's
                # Rule(base_trial, other_trials) or (base_trial, action_str, other_trials)).
                views = [view_of(t, worker) for t in self.other_trials]
                if len(args) > 1 and isinstance(args[1], list | tuple):
                    args[1] = views
                elif len(args) > 2:
                    args[2] = views
                else:
                    kwargs["other_trials"] = views
            rule = self._per_worker[worker] = type(self)(*args, **kwargs)
        return rule

    def worker_copies(self) -> list[tuple[str, EveryWorker]]:
        """``(worker, its copy)`` for each worker of a multi-worker trial; [] with one worker."""
        return [(w, self._copy_for(w)) for w in self._workers()]

    def invoke_at_step(self, step: int) -> bool:
        copies = self.worker_copies()
        if not copies:
            return self.invoke_worker_step(step)
        fired: Finding | None = None
        error: Exception | None = None
        evaluated = False
        for worker, rule in copies:
            if not rule.base_trial.wrote(step):
                continue
            rule.finding = None
            try:
                hit = rule.invoke_worker_step(step)
            except LOOKUP_ERRORS as exc:
                error = error or exc
                continue
            evaluated = True
            if hit and fired is None:
                fired = self._labelled(rule.finding, step, worker)
        if fired is not None:
            self.finding = fired
            return True
        if not evaluated and error is not None:
            raise error
        return False

    def _labelled(self, finding: Finding | None, step: int, worker: str) -> Finding:
        if finding is None:
            finding = Finding(step, f"{self.rule_name}: condition met at step {step}")
        return Finding(finding.step, worker_label(finding.message, self.rule_name, worker),
                       finding.tensor, finding.value)
