"""Black-box: ``make demo`` (training_images/examples/seed_demo.py) and the ``murphy`` CLI, run as real processes."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "training_images" / "examples"


def _run(args: list[str], env_extra: dict[str, str] | None = None, **kw: object) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("MURPHY_ENDPOINT", "MURPHY_S3_LOCAL_ROOT")}
    env.update({"PYTHONUNBUFFERED": "1", **(env_extra or {})})
    return subprocess.run(args, capture_output=True, text=True, timeout=240, env=env, check=False, **kw)  # type: ignore[call-overload,no-any-return]


@pytest.mark.slow
def test_demo_reproduces_the_seed_scenario_end_to_end(tmp_path: Path) -> None:
    """``make demo``: the embedded service, the rule stopping the job, the trial, the diagnosis,
    then the healthy rerun; in well under a minute."""
    started = time.monotonic()
    proc = _run([sys.executable, str(EXAMPLES / "seed_demo.py")], cwd=tmp_path,
                env_extra={"MURPHY_DATA_DIR": str(tmp_path / "murphy")})
    elapsed = time.monotonic() - started
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = proc.stdout
    bad, good = out.split("4. Training again with sane hyperparameters")
    # The article's log: loss ~1e23..1e24 at steps 0-1, then nan.
    losses = re.findall(r"^Step=(\d+), Loss=(\S+)$", bad, re.MULTILINE)
    assert [s for s, _ in losses] == [str(i) for i in range(10)]
    assert 1e22 < float(losses[0][1]) < 1e25 and 1e22 < float(losses[1][1]) < 1e25
    assert all(loss == "nan" for _, loss in losses[2:])
    # The rule box goes InProgress -> IssuesFound; the job is stopped.
    box = re.findall(r"^\*    ExplodingTensor: (\w+)", bad, re.MULTILINE)
    assert box[0] == "InProgress" and box[-1] == "IssuesFound"
    assert re.search(r"^Training job debugger-simple-demo-\S+ ended: Stopped \(Stopped\)$", bad, re.MULTILINE)
    assert "\nExplodingTensor\nIssuesFound\n" in bad
    # The trial, like the article: the gradient per step, ~1e23 then nan.
    assert "tensors: ['LinearRegression_weight', 'MSELoss_output_0', 'gradient/LinearRegression_weight']" in bad
    values = re.findall(r"^  step (\d+)  Value:  \[\[(\S+)\] \[(\S+)\]\]$", bad, re.MULTILINE)
    assert [int(s) for s, _, _ in values] == list(range(10))
    assert all(1e22 < float(v) < 1e25 for _, a, b in values[:2] for v in (a, b))
    assert all(a == b == "nan" for _, a, b in values[2:])
    # The diagnosis names the tensor and the step, and the hyperparameters; it says it is a heuristic.
    assert "a heuristic" in bad
    assert "ExplodingTensor: tensor LinearRegression_weight first went non-finite at step 2" in bad
    assert "  - lr=100: " in bad and "  - scale=1e+11: " in bad
    # The healthy rerun.
    assert re.findall(r"^\*    ExplodingTensor: (\w+)", good, re.MULTILINE)[-1] == "NoIssuesFound"
    assert re.search(r"^Training job debugger-simple-demo-\S+ ended: Completed \(Completed\)$", good, re.MULTILINE)
    assert "\nExplodingTensor: NoIssuesFound\n" in good
    assert elapsed < 90, f"the demo took {elapsed:.0f} s"


def test_cli_trial_summarises_a_run(tmp_path: Path) -> None:
    out_dir = tmp_path / "run"
    train = (
        f"import sys; sys.path.insert(0, {str(EXAMPLES)!r})\n"
        "from linear_regression import train\n"
        f"train({str(out_dir)!r}, lr=0.1, scale=1.0, steps=4)\n"
    )
    proc = _run([sys.executable, "-c", train])
    assert proc.returncode == 0, proc.stderr
    cli = _run([str(Path(sys.executable).parent / "murphy"), "trial", str(out_dir), "--values"])
    assert cli.returncode == 0, cli.stderr
    assert "steps: 4 (0..3)" in cli.stdout
    assert "training ended: True" in cli.stdout
    assert re.search(r"gradient/LinearRegression_weight: 4 steps, last \(step 3\)", cli.stdout)
    assert "MSELoss_output_0: 4 steps" in cli.stdout
