"""The ``murphy`` command line: ``server`` (the control plane), ``jobs`` (list, describe, stop,
logs), ``events`` (subscriptions, dead letters, tail), ``keys`` (access keys), ``trial`` (inspect
saved tensors), ``tensorboard export``, ``rule-eval`` (one rule container, see
``rule_containers/README.md``), ``kubernetes render`` (a job's Kubernetes manifests) and ``version``."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

import numpy as np


def _trial(args: argparse.Namespace) -> int:
    from murphy.trial import create_trial

    trial = create_trial(args.path)
    steps = trial.steps()
    print(f"trial: {args.path}")
    print(f"workers: {', '.join(trial.workers())}")
    print(f"steps: {len(steps)} ({steps[0]}..{steps[-1]})" if steps else "steps: none")
    print(f"training ended: {trial.training_has_ended()}")
    for name in trial.tensor_names(regex=args.regex) if args.regex else trial.tensor_names():
        tensor = trial.tensor(name)
        tsteps = tensor.steps()
        line = f"  {name}: {len(tsteps)} steps"
        if args.values and tsteps:
            try:
                value = tensor.value(tsteps[-1])
                line += f", last (step {tsteps[-1]}) = {np.array2string(np.asarray(value).ravel()[:6], precision=4)}"
            except Exception as e:  # reductions-only tensors have no raw value
                line += f" ({type(e).__name__})"
        print(line)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``murphy`` console script."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["rule-eval"]:
        from murphy.rules.entrypoint import main as rule_eval

        return rule_eval(argv[1:])
    parser = argparse.ArgumentParser(prog="murphy", description="Watch training jobs, stop them when they go wrong.")
    sub = parser.add_subparsers(dest="command", required=True)
    from murphy.cli import events, jobs, keys, kubernetes, server, tensorboard
    from murphy.cli import run as run_command

    server.add_parser(sub)
    jobs.add_parser(sub)
    events.add_parser(sub)
    keys.add_parser(sub)
    run_command.add_parser(sub)
    kubernetes.add_parser(sub)
    tensorboard.add_parser(sub)
    p = sub.add_parser("trial", help="summarise the tensors saved under a path or s3:// URI")
    p.add_argument("path")
    p.add_argument("--regex", help="only tensors matching this regex")
    p.add_argument("--values", action="store_true", help="print each tensor's last value")
    p.set_defaults(func=_trial)
    sub.add_parser("rule-eval", help="evaluate one rule over a training job (a rule container); see rule-eval --help")
    v = sub.add_parser("version", help="print murphy's version")
    v.set_defaults(func=lambda _a: print(__import__("murphy").__version__) or 0)
    args = parser.parse_args(argv)
    result: int = args.func(args)
    return result


if __name__ == "__main__":
    sys.exit(main())
