"""Black-box: the demo script and the ``murphy`` CLI, run as real processes."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "training_images" / "examples"


def _run(args: list[str], **kw: object) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.run(args, capture_output=True, text=True, timeout=240, env=env, check=False, **kw)  # type: ignore[call-overload,no-any-return]


@pytest.mark.slow
def test_demo_reproduces_the_seed_explosion_and_reads_it_back() -> None:
    proc = _run([sys.executable, str(EXAMPLES / "pytorch_demo.py")])
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    # The article's numbers: loss ~1e23..1e24 at steps 0-1, then nan.
    losses = re.findall(r"Step=(\d+), Loss=(\S+)", out)
    assert [s for s, _ in losses[:10]] == [str(i) for i in range(10)]
    assert 1e22 < float(losses[0][1]) < 1e25
    assert losses[2][1] == "nan"
    assert "gradient/LinearRegression_weight" in out
    # ExplodingTensor names the first tensor in order of computation: the weights, which the
    # step-1 update (inf - inf in Adam's second moment) turned into NaN.
    assert "diagnosis: LinearRegression_weight first went non-finite at step 2" in out
    # The healthy rerun stays finite.
    assert out.rstrip().endswith("diagnosis: every saved tensor is finite")


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
