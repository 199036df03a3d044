"""CreateXgboostReport on a real XGBoost run recorded by murphy's hook: NoIssuesFound at the end,
and an HTML report with the metrics, feature importance, confusion matrix and tree depth plots in
the rule's output."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

if os.environ.get("CI"):
    import xgboost  # noqa: F401
else:
    pytest.importorskip("xgboost")

import numpy as np
import xgboost as xgb

from murphy.hook import SaveConfig
from murphy.hook.xgboost import Hook
from murphy.rules.builtin.create_xgboost_report import REPORT_FILE
from murphy.rules.engine import evaluate_rule
from murphy.rules.registry import lookup
from murphy.trial import create_trial


def _run(out: Path) -> None:
    rng = np.random.default_rng(3)
    x = rng.normal(size=(300, 4))
    y = np.digitize(x[:, 0] + 0.2 * rng.normal(size=300), [-0.5, 0.5])
    dtrain, dval = xgb.DMatrix(x[:240], label=y[:240]), xgb.DMatrix(x[240:], label=y[240:])
    hook = Hook(out_dir=out, save_config=SaveConfig(save_interval=2), hyperparameters={"objective": "multi:softprob"},
                include_collections=["metrics", "feature_importance", "hyperparameters", "predictions", "labels", "trees"],
                validation_data=dval)
    xgb.train({"objective": "multi:softprob", "num_class": 3, "max_depth": 3, "nthread": 1}, dtrain, 9,
              evals=[(dtrain, "train"), (dval, "validation")], callbacks=[hook], verbose_eval=False)


def test_report_of_a_real_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    logging.getLogger("murphy.hook").setLevel(logging.ERROR)
    _run(tmp_path / "trial")
    out = tmp_path / "rule-output" / "CreateXgboostReport"
    monkeypatch.setenv("MURPHY_RESULT_PATH", str(out))
    rule = lookup("CreateXgboostReport")(create_trial(str(tmp_path / "trial")))
    outcome = evaluate_rule(rule, poll_interval=0.01, idle_timeout=5.0)
    assert outcome.status == "NoIssuesFound"
    html = (out / REPORT_FILE).read_text()
    assert html.startswith("<!DOCTYPE html>") and "Up to step 8" in html
    for section in ("Hyperparameters", "Metrics", "Feature importance", "Confusion matrix", "Tree depth"):
        assert f"<h2>{section}</h2>" in html
    assert html.count("<svg") >= 1 + 5 + 1 + 1  # metrics, 5 importance types, confusion, depth
    assert "validation-mlogloss" in html and "multi:softprob" in html
    assert "No labels" not in html and "No trees saved" not in html
    assert rule.confusion is not None and sum(map(sum, rule.confusion[1])) == 60
    assert [s for s, _ in rule.metrics["train-mlogloss"]] == [0, 2, 4, 6, 8]


def test_unknown_parameter_is_refused(tmp_path: Path) -> None:
    from murphy.rules.params import RuleParameterError

    _run(tmp_path / "trial")
    with pytest.raises(RuleParameterError, match="CreateXgboostReport"):
        lookup("CreateXgboostReport")(create_trial(str(tmp_path / "trial")), bogus="1")
