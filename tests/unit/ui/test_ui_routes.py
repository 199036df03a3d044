"""The dashboard's /v1 routes and pages, through the app (TestClient) on the fake runtime."""

from __future__ import annotations

import hashlib
import io
import json
import math
import re
import time
from pathlib import Path

import numpy as np
import pytest
from apihelp import Plane, TestClient, aws, training_request
from uikit import collections, end, job_store, step

import murphy.ui
from murphy.jobs.model import RuleEvaluationStatus
from murphy.jobs.service import mutate
from murphy.ui.tensors import STATS, TensorCache

W, G, LOSS = "fc.weight", "gradient/fc.weight", "loss"


def _job(client: TestClient, plane: Plane, name: str = "job-1") -> object:
    aws(client, "SageMaker.CreateTrainingJob", training_request(name))
    store = job_store(plane, name)
    collections(store, losses=[LOSS], weights=[W], gradients=[G])
    return store


def _strict(text: str) -> object:
    # Browsers' JSON.parse rejects bare NaN/Infinity: so must this.
    def bad(name: str) -> None:
        raise AssertionError(f"invalid JSON constant {name}")
    return json.loads(text, parse_constant=bad)


def test_series_downsamples_keeps_nan_and_spike_and_appends_new_steps(client: TestClient, plane: Plane,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    store = _job(client, plane)
    for n in range(300):
        loss = math.nan if n == 250 else (1e6 if n == 123 else 1.0 / (n + 1))
        step(store, n, {LOSS: loss, W: np.full((2, 2), n)})
    r = client.get("/v1/training-jobs/job-1/series", params={"tensor": LOSS, "px": 50})
    assert r.status_code == 200
    doc = _strict(r.text)
    assert isinstance(doc, dict)
    assert doc["raw"] is False and len(doc["steps"]) == 50 and doc["points"] == 300
    assert max(v for v in doc["max"] if v is not None) == 1e6
    assert doc["nonfinite"] == [[250, 250, "NaN", 1]] and doc["first_nonfinite_step"] == 250
    assert doc["steps"][-1] == 299
    window = client.get("/v1/training-jobs/job-1/series", params={"tensor": LOSS, "x0": 120, "x1": 130, "px": 50}).json()
    assert window["raw"] is True and window["steps"] == list(range(120, 131))  # zoom: full resolution
    # A running job: new steps are read (only they) and ?after= returns just them.
    reads = []
    original = TensorCache._read
    monkeypatch.setattr(TensorCache, "_read", staticmethod(lambda t, s: reads.append(s) or original(t, s)))
    for n in range(300, 305):
        step(store, n, {LOSS: math.inf, W: np.zeros((2, 2))})
    time.sleep(0.3)  # the trial lists new index files at most every poll interval (0.2 s)
    more = client.get("/v1/training-jobs/job-1/series", params={"tensor": LOSS, "after": 299}).json()
    assert reads == [300, 301, 302, 303, 304]
    assert more["steps"] == [300, 301, 302, 303, 304] and more["last"] == ["Infinity"] * 5
    assert more["nonfinite"] == [[300, 304, "Infinity", 5]] and more["total"] == 305


def test_nonfinite_table_reductions_heatmap_histogram_and_inspector(client: TestClient, plane: Plane) -> None:
    store = _job(client, plane)
    for n in range(6):
        w = np.array([[1.0, 2.0], [3.0, n]])
        g = np.array([[0.5, -0.5], [0.1, 0.1]]) * 10**n
        if n >= 3:
            w[0, 0] = math.nan
        if n >= 4:
            g[1, 1] = math.inf
        step(store, n, {W: w, LOSS: float(n), G: g})
    end(store)
    table = _strict(client.get("/v1/training-jobs/job-1/nonfinite").text)
    assert table == {"rows": [{"tensor": W, "step": 3, "nan_count": 1.0, "inf_count": 0.0, "value": "NaN"},
                              {"tensor": G, "step": 4, "nan_count": 0.0, "inf_count": 1.0, "value": "Infinity"}],
                     "first_step": 3}
    red = client.get("/v1/training-jobs/job-1/reductions", params={"tensor": G}).json()
    assert red["shape"] == [2, 2] and red["stats"]["max"]["last"][:2] == [0.5, 5.0]
    assert red["stats"]["inf_count"]["last"] == [0, 0, 0, 0, 1, 1]
    heat = _strict(client.get("/v1/training-jobs/job-1/heatmap", params={"regex": "^gradient/"}).text)
    assert isinstance(heat, dict) and heat["rows"] == [G] and heat["steps"] == list(range(6))
    assert heat["values"][0][4:] == ["Infinity", "Infinity"] and heat["values"][0][0] == pytest.approx(math.sqrt(0.52), rel=1e-6)
    hist = client.get("/v1/training-jobs/job-1/histogram", params={"tensor": W, "bins": 4}).json()
    assert hist["steps"] == list(range(6)) and hist["nan"] == [0, 0, 0, 1, 1, 1]
    assert [sum(c) for c in hist["counts"]] == [4, 4, 4, 3, 3, 3] and len(hist["edges"]) == 5
    insp = _strict(client.get("/v1/training-jobs/job-1/steps/1").text)
    assert isinstance(insp, dict)
    rows = {r["tensor"]: r for r in insp["tensors"]}
    assert set(rows) == {W, G, LOSS}
    assert rows[W]["shape"] == [2, 2] and rows[W]["dtype"] == "float32" and rows[W]["prev_step"] == 0
    assert rows[W]["delta_l2"] == 1.0 and rows[LOSS]["value"] == 1.0
    npy = client.get("/v1/training-jobs/job-1/npy", params={"tensor": W, "step": 3})
    assert npy.status_code == 200 and "attachment" in npy.headers["content-disposition"]
    got = np.load(io.BytesIO(npy.content))
    assert got.shape == (2, 2) and math.isnan(got[0, 0]) and got[1, 1] == 3
    names = client.get("/v1/training-jobs/job-1/tensors", params={"regex": "weight$"}).json()
    assert names["tensors"] == [W, G] and names["collections"]["losses"] == [LOSS] and names["ended"] is True
    assert client.get("/v1/training-jobs/job-1/tensors", params={"collection": "gradients"}).json()["tensors"] == [G]


def test_bad_input_is_a_clear_400_and_an_unknown_job_404(client: TestClient, plane: Plane) -> None:
    store = _job(client, plane)
    step(store, 0, {LOSS: 1.0})
    for path, params, words in [
        ("series", {}, "'tensor' is required"),
        ("series", {"tensor": LOSS, "px": "wide"}, "'px' must be an integer"),
        ("series", {"tensor": LOSS, "px": 0}, "px must be between 1 and 10000"),
        ("series", {"tensor": LOSS, "stat": "median"}, "stat must be one of"),
        ("series", {"tensor": "nope"}, "nope"),
        ("tensors", {"regex": "("}, "missing ), unterminated subpattern"),
        ("npy", {"tensor": LOSS}, "'tensor' and 'step' are required"),
        ("histogram", {"tensor": LOSS, "bins": 0}, "bins must be between"),
    ]:
        r = client.get(f"/v1/training-jobs/job-1/{path}", params=params)
        assert r.status_code == 400 and r.json()["__type"] == "ValidationException", (path, r.text)
        assert words in r.json()["message"], (path, r.json())
    r = client.get("/v1/training-jobs/nope/series", params={"tensor": LOSS})
    assert r.status_code == 404 and r.json()["__type"] == "ValidationException"


def test_a_job_without_tensors_yet_answers_empty(client: TestClient, plane: Plane) -> None:
    aws(client, "SageMaker.CreateTrainingJob", training_request("job-1"))
    assert client.get("/v1/training-jobs/job-1/tensors").json()["tensors"] == []
    assert client.get("/v1/training-jobs/job-1/nonfinite").json() == {"rows": [], "first_step": None}
    doc = client.get("/v1/training-jobs/job-1/dashboard").json()
    assert doc["last_step"] is None and doc["rules"][0]["status"] == "InProgress"


def test_job_document_has_the_rule_finding_as_fields(client: TestClient, plane: Plane) -> None:
    store = _job(client, plane)
    for n in range(4):
        step(store, n, {LOSS: 1.0})

    def fire(rec: object) -> bool:
        rule = rec.rules[0]  # type: ignore[attr-defined]
        rule.set_status(RuleEvaluationStatus.IssuesFound, "RuleEvaluationConditionMet: Evaluation of the rule "
                        "ExplodingTensor at step 2 resulted in the condition being met", plane.clock())
        rule.result = {"status": "IssuesFound", "step": 2, "tensor": W, "value": "nan", "last_step": 2,
                       "steps_evaluated": 3, "findings": [{"step": 2, "tensor": W, "value": "nan", "message": "m"}]}
        return True

    mutate(plane.store, "job-1", fire)
    doc = _strict(client.get("/v1/training-jobs/job-1/dashboard").text)
    assert isinstance(doc, dict)
    rule = doc["rules"][0]
    assert (rule["status"], rule["step"], rule["tensor"], rule["value"]) == ("IssuesFound", 2, W, "NaN")
    assert rule["parameters"] == {"rule_to_invoke": "ExplodingTensor"} and rule["evaluated_step"] == 2
    assert rule["lag"] == 1 and doc["last_step"] == 3
    assert {"step": 2, "label": "ExplodingTensor: IssuesFound", "kind": "finding"} in doc["markers"]
    rows = client.get("/v1/ui/jobs").json()["jobs"]
    assert rows[0]["rules"] == [{"name": "ExplodingTensor", "status": "IssuesFound", "step": 2}]
    assert rows[0]["instance_type"] == "ml.m5.xlarge"
    assert client.get("/v1/ui/jobs", params={"status": "Completed"}).json()["jobs"] == []


def test_pages_render_with_the_vendored_libraries(client: TestClient, plane: Plane) -> None:
    aws(client, "SageMaker.CreateTrainingJob", training_request("job-1"))
    jobs = client.get("/ui/")
    assert jobs.status_code == 200 and "text/html" in jobs.headers["content-type"]
    assert '<option value="Stopped">Stopped</option>' in jobs.text and "/ui/static/jobs.js" in jobs.text
    page = client.get("/ui/jobs/job-1")
    assert 'data-job="job-1"' in page.text and 'href="/v1/training-jobs/job-1"' in page.text
    assert "<script>" not in client.get("/ui/jobs/<script>").text  # autoescaped
    for ref in ("vendor/uplot-1.6.32/uPlot.iife.min.js", "vendor/uplot-1.6.32/uPlot.min.css", "murphy.css", "murphy.js",
                "job.js"):
        assert f'"/ui/static/{ref}"' in page.text, ref
        assert client.get(f"/ui/static/{ref}").status_code == 200
    # The Tensors section's reduction selector offers every stat the series route draws.
    stats = re.search(r'<select id="t-stat"[^>]*>(.*?)</select>', page.text, re.S)
    assert stats is not None
    offered = re.findall(r'value="(\w+)"', stats.group(1))
    assert offered[0] == "l2" and sorted(offered) == sorted(set(STATS) - {"value"})  # "value" is the Scalars' line
    assert "cdn" not in page.text.lower() and "https://" not in page.text
    # The vendored files are the pinned release: their checksums match SHA256SUMS.
    vendor = Path(murphy.ui.__file__).parent / "static" / "vendor" / "uplot-1.6.32"
    for line in (vendor / "SHA256SUMS").read_text().splitlines():
        digest, name = line.split()
        assert hashlib.sha256((vendor / name).read_bytes()).hexdigest() == digest, name
        assert client.get(f"/ui/static/vendor/uplot-1.6.32/{name}").content == (vendor / name).read_bytes()


def test_a_running_rule_shows_its_heartbeat_progress_and_lag(client: TestClient, plane: Plane) -> None:
    from murphy.jobs.plans import open_uri

    store = _job(client, plane)
    for n in range(10):
        step(store, n, {LOSS: 1.0})
    rule = plane.store.get("job-1").rules[0]
    assert rule.result_uri
    open_uri(plane.settings, rule.result_uri).put("heartbeat.json", json.dumps(
        {"status": "InProgress", "last_step": 6, "steps_evaluated": 7}).encode())
    doc = client.get("/v1/training-jobs/job-1/dashboard").json()
    row = doc["rules"][0]
    assert (row["status"], row["evaluated_step"], row["steps_evaluated"], row["lag"]) == ("InProgress", 6, 7, 3)
    assert row["step"] is None and doc["markers"] == []


def test_every_static_file_and_template_ships_in_the_wheel() -> None:
    import fnmatch

    import tomllib

    repo = Path(__file__).resolve().parents[3]
    globs = tomllib.loads((repo / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["murphy"]
    root = Path(murphy.ui.__file__).parent
    files = [p for d in ("static", "templates") for p in (root / d).rglob("*") if p.is_file()]
    assert len(files) >= 10
    for p in files:
        rel = p.relative_to(root.parent).as_posix()
        assert any(fnmatch.fnmatchcase(rel, g) and rel.count("/") == g.count("/") for g in globs), rel
