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

from linear_regression import train  # noqa: E402

from murphy.trial import create_trial  # noqa: E402


def show(out_dir: str, title: str, **hp: float) -> None:
    print(f"\n=== {title}: {hp} ===")
    train(out_dir, **hp)  # type: ignore[arg-type]
    trial = create_trial(out_dir)
    print(f"\ntrial at {out_dir}")
    print("steps:", trial.steps())
    print("tensors:", trial.tensor_names())
    first_bad: tuple[str, int] | None = None
    for name in trial.tensor_names(collection="gradients"):
        print(f"\n{name}")
        for step in trial.tensor(name).steps():
            value = trial.tensor(name).value(step)
            print(f"  step {step}: {np.array2string(value.ravel(), precision=3)}")
    for step in trial.steps():
        for name in trial.tensor_names():
            if not np.all(np.isfinite(trial.tensor(name).value(step))):
                first_bad = (name, step)
                break
        if first_bad:
            break
    if first_bad:
        print(f"\ndiagnosis: {first_bad[0]} first went non-finite at step {first_bad[1]}")
    else:
        print("\ndiagnosis: every saved tensor is finite")


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="murphy-demo-") as tmp:
        show(str(Path(tmp) / "bad"), "exploding run", lr=100.0, scale=1e11, steps=10)
        show(str(Path(tmp) / "good"), "healthy run", lr=0.1, scale=1.0, steps=10)


if __name__ == "__main__":
    main()
