"""`make demo` (data plane edition): train the seed's linear regression with murphy's hook, then
read the saved tensors back with a trial, the way the article does with smdebug.

The full demo (control plane, ExplodingTensor rule, stopping the job) comes with later issues.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))

from linear_regression import train

from murphy.rules.builtin.exploding_tensor import ExplodingTensor
from murphy.rules.engine import evaluate_rule
from murphy.trial import create_trial


def show(out_dir: str, title: str, **hp: float) -> None:
    print(f"\n=== {title}: {hp} ===")
    train(out_dir, **hp)  # type: ignore[arg-type]
    trial = create_trial(out_dir)
    print(f"\ntrial at {out_dir}")
    print("steps:", trial.steps())
    print("tensors:", trial.tensor_names())
    for name in trial.tensor_names(collection="gradients"):
        print(f"\n{name}")
        for step in trial.tensor(name).steps():
            value = trial.tensor(name).value(step)
            print(f"  step {step}: {np.array2string(value.ravel(), precision=3)}")
    # The diagnosis is murphy's own ExplodingTensor rule, not a hand-written scan.
    outcome = evaluate_rule(ExplodingTensor(trial))
    if outcome.status == "IssuesFound":
        print(f"\ndiagnosis: {outcome.tensor} first went non-finite at step {outcome.step}")
    else:
        print("\ndiagnosis: every saved tensor is finite")


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="murphy-demo-") as tmp:
        show(str(Path(tmp) / "bad"), "exploding run", lr=100.0, scale=1e11, steps=10)
        show(str(Path(tmp) / "good"), "healthy run", lr=0.1, scale=1.0, steps=10)


if __name__ == "__main__":
    main()
