"""Issue 19's browser acceptance: Debian's chromium, driven by Playwright, against a real
``murphy server`` (process runtime) running the seed job (lr=100, inputs x1e11, ExplodingTensor).

The driver (browser_driver.py, in the browser venv) only observes; the assertions are here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))
from test_control_plane import EXPLODING, job_request, start_plane, watch

from sourcetar import train_py_tarball

DRIVER = Path(__file__).with_name("browser_driver.py")

pytestmark = pytest.mark.slow

# The demo, slowed to ~4 steps a second, so a page watches steps arrive.
SLOW_DEMO = """
import sys, time
from murphy.demos import linear_regression as lr
forward = lr.LinearRegression.forward
def slow(self, x):
    time.sleep(0.25)
    return forward(self, x)
lr.LinearRegression.forward = slow
lr.main(["--lr", "0.001", "--scale", "1", "--steps", "120", "--debug_frequency", "1"])
"""


class Driver:
    def __init__(self, python: str, endpoint: str, out: Path, scenario: str, job: str) -> None:
        self.proc = subprocess.Popen([python, str(DRIVER), endpoint, str(out), scenario, job],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                     env={k: v for k, v in os.environ.items() if not k.startswith("PYTHON")})

    def line(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        text = self.proc.stdout.readline()
        assert text, f"the browser driver ended early (rc={self.proc.wait(30)})"
        return dict(json.loads(text))

    def go(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()

    def facts(self) -> dict[str, Any]:
        out = self.line()
        assert self.proc.wait(60) == 0
        for pipe in (self.proc.stdin, self.proc.stdout):
            if pipe is not None:
                pipe.close()
        return out


def test_seed_job_in_the_browser(request: pytest.FixtureRequest, make_server: Any, monkeypatch: pytest.MonkeyPatch,
                                 browser_python: str, artifacts_dir: Path) -> None:
    server = start_plane(request, make_server, monkeypatch, "process", "local")
    driver = Driver(browser_python, server.endpoint, artifacts_dir, "seed", "seed-exploding")
    assert driver.line() == {"ready": "jobs page open"}
    client = server.client()
    client.create_training_job(**job_request("seed-exploding", "murphy-e2e", EXPLODING))
    driver.go()
    job, _ = watch(client, "seed-exploding")
    assert job["TrainingJobStatus"] == "Stopped", server.log()[-3000:]
    facts = driver.facts()
    assert "failure" not in facts, facts
    # The jobs list rendered the row, and its rule badge went InProgress -> IssuesFound @ 2 live.
    texts = facts["jobs_rule_texts"]
    assert texts[0] == "ExplodingTensor: InProgress", texts
    assert texts[-1] == "ExplodingTensor: IssuesFound @ 2", texts
    assert facts["jobs_no_reload"] is True
    assert "seed-exploding" in facts["jobs_row"] and "ml.m5.xlarge" in facts["jobs_row"]
    # The rules table has the fired step as a field.
    assert facts["fired_step"] == "2" and "IssuesFound" in facts["rule_row"], facts["rule_row"]
    assert "LinearRegression_weight" in facts["rule_row"]
    # The first non-finite table names the weight tensor at step 2, first.
    assert facts["nonfinite_rows"][0] == ["2", "LinearRegression_weight"], facts["nonfinite_rows"]
    # The loss chart is painted (ink) and shows the red NaN rail and first-non-finite line.
    pixels = facts["loss_pixels"]
    assert pixels["ink"] > 2000 and pixels["red"] > 100, pixels
    assert facts["heatmap_pixels"]["red"] > 100, facts["heatmap_pixels"]
    assert facts["inspector_rows"] == 3
    # Clicking the finding moved the charts to its step.
    x0, x1 = facts["zoom_after_finding"]
    assert x0 <= 2 <= x1
    # The reduction selector: the weight's NaN count over the zoomed window, 0 before step 2, 2 after.
    red = facts["reduction"]
    assert red["title"] == "LinearRegression_weight: nan_count", red
    assert red["steps"] and all(x0 <= s <= x1 for s in red["steps"]), red
    assert red["last"] == [0 if s < 2 else 2 for s in red["steps"]], red
    assert facts["errors"] == [], facts["errors"]
    for shot in ("jobs.png", "job.png", "job-top.png", "tensors.png"):
        assert (artifacts_dir / shot).stat().st_size > 10_000




def test_zoom_survives_live_appends(request: pytest.FixtureRequest, make_server: Any, monkeypatch: pytest.MonkeyPatch,
                                    browser_python: str, artifacts_dir: Path) -> None:
    server = start_plane(request, make_server, monkeypatch, "process", "local")
    src = server.data_dir / "buckets" / "murphy-e2e" / "src" / "slow.tar.gz"
    src.parent.mkdir(parents=True, exist_ok=True)
    src.write_bytes(train_py_tarball(SLOW_DEMO))
    body = job_request("slow-demo", "murphy-e2e", {
        "sagemaker_program": '"train.py"', "sagemaker_submit_directory": '"s3://murphy-e2e/src/slow.tar.gz"'})
    body["AlgorithmSpecification"]["TrainingImage"] = "763104351884.dkr.ecr.us-west-2.amazonaws.com/pytorch-training:2.1-cpu-py310"
    body.pop("DebugRuleConfigurations")
    driver = Driver(browser_python, server.endpoint, artifacts_dir, "zoom", "slow-demo")
    assert driver.line() == {"ready": "driver up"}
    client = server.client()
    client.create_training_job(**body)
    driver.go()
    facts = driver.facts()
    assert "failure" not in facts, (facts, server.log()[-3000:])
    if client.describe_training_job(TrainingJobName="slow-demo")["TrainingJobStatus"] == "InProgress":
        client.stop_training_job(TrainingJobName="slow-demo")
    x0, x1 = facts["zoom"]
    assert facts["total_after"] > facts["total_before"], facts  # steps arrived while zoomed
    assert facts["zoom_after"] == [x0, x1]
    assert facts["scale"] == [x0, x1], facts  # the chart still shows the zoomed window
    assert all(x0 <= s <= x1 for s in facts["window_steps"]), facts["window_steps"]
    assert facts["errors"] == [], facts["errors"]
