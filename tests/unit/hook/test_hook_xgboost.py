"""murphy.hook.xgboost on real xgboost (the xgboost-cpu wheel): names, steps, dtypes, collections,
the fixed smdebug bugs, xgboost.train / xgboost.cv / XGBClassifier, and the never-break policy.
In CI xgboost must be installed (``make setup`` installs the ``xgboost`` extra): no skip there."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

if os.environ.get("CI"):
    import xgboost as xgb
else:
    xgb = pytest.importorskip("xgboost")

from murphy.hook import ModeKeys, SaveConfig, SaveConfigMode
from murphy.hook.xgboost import Hook
from murphy.trial import create_trial

ALL = ["hyperparameters", "metrics", "losses", "predictions", "labels", "feature_importance",
       "average_shap", "full_shap", "trees"]


def _data(n: int = 120, features: int = 4, seed: int = 0, names: list[str] | None = None) -> tuple[Any, Any]:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, features)).astype(np.float32)
    y = (x[:, 0] + 0.2 * rng.normal(size=n) > 0).astype(np.float32)
    cut = n * 3 // 4
    return (xgb.DMatrix(x[:cut], label=y[:cut], feature_names=names),
            xgb.DMatrix(x[cut:], label=y[cut:], feature_names=names))


PARAMS = {"objective": "binary:logistic", "max_depth": 3, "nthread": 1, "eval_metric": ["logloss", "auc"]}


def _train(hook: Any, rounds: int = 12, params: dict[str, Any] | None = None, data: Any = None) -> Any:
    dtrain, dval = data or _data()
    return xgb.train(params or PARAMS, dtrain, num_boost_round=rounds,
                     evals=[(dtrain, "train"), (dval, "validation")], callbacks=[hook], verbose_eval=False)


def test_defaults_save_metrics_every_ten_rounds_and_end_the_run(tmp_path: Path) -> None:
    hook = Hook(out_dir=tmp_path / "t")
    _train(hook, rounds=21)
    trial = create_trial(str(tmp_path / "t"))
    assert trial.steps() == [0, 10, 20]
    assert trial.tensor_names() == ["train-auc", "train-logloss", "validation-auc", "validation-logloss"]
    assert (tmp_path / "t" / "training_job_end.ts").exists()
    assert trial.tensor_names(collection="losses") == ["train-logloss", "validation-logloss"]
    value = trial.tensor("validation-logloss").value(10)
    assert value.dtype == np.float64 and value.shape == (1,)
    doc = json.loads(next((tmp_path / "t" / "collections").rglob("*.json")).read_text())
    assert set(doc["collections"]) == {"all", "default", "hyperparameters", "metrics", "losses", "predictions",
                                       "labels", "feature_importance", "average_shap", "full_shap", "trees"}
    assert doc["collections"]["metrics"]["include_regex"] == ["^[a-zA-z]+-[a-zA-z0-9]+$"]
    assert doc["collections"]["metrics"]["save_config"]["GLOBAL"]["save_interval"] == 10


def test_every_collection_names_dtypes_and_values(tmp_path: Path) -> None:
    dtrain, dval = _data()
    hook = Hook(out_dir=tmp_path / "t", include_collections=ALL, save_config=SaveConfig(save_interval=4),
                hyperparameters={"objective": "binary:logistic", "max_depth": 3, "eta": 0.3},
                train_data=dtrain, validation_data=dval)
    bst = _train(hook, rounds=9, data=(dtrain, dval))
    trial = create_trial(str(tmp_path / "t"))
    assert trial.steps() == [0, 4, 8]
    assert trial.tensor("hyperparameters/objective").value(4).tolist() == ["binary:logistic"]
    assert trial.tensor("hyperparameters/max_depth").value(0).dtype == np.int64
    np.testing.assert_allclose(trial.tensor("predictions").value(8), bst.predict(dval), rtol=1e-6)
    np.testing.assert_array_equal(trial.tensor("labels").value(0), dval.get_label())
    weights = {n: float(trial.tensor(n).value(8)[0]) for n in trial.tensor_names(regex="^feature_importance/weight/")}
    assert weights and abs(sum(weights.values()) - 1.0) < 1e-9
    scores = bst.get_score(importance_type="gain")
    total = sum(scores.values())
    for f, s in scores.items():
        assert trial.tensor(f"feature_importance/gain/{f}").value(8)[0] == pytest.approx(s / total)
    # Trees of round 8 only, columns as trees_to_dataframe (strings for IDs and features).
    tree = {c: trial.tensor(f"trees/{c}").value(8) for c in ("Tree", "Node", "ID", "Feature", "Yes", "Gain", "Split")}
    assert set(tree["Tree"].tolist()) == {8} and tree["Node"].dtype == np.int64
    assert tree["ID"][0] == "8-0" and tree["ID"].dtype.kind == "U"
    df_rows = bst[8:9].get_dump(with_stats=True)[0].count("\n")
    assert len(tree["Node"]) == df_rows
    leaves = tree["Feature"] == "Leaf"
    assert leaves.any() and np.isnan(tree["Split"][leaves]).all() and (tree["Yes"][leaves] == "nan").all()
    # SHAP: average per feature, full = that feature's column (one value per training row).
    shap = bst.predict(dtrain, pred_contribs=True)
    np.testing.assert_allclose(trial.tensor("full_shap/f1").value(8), shap[:, 1], rtol=1e-6)
    assert trial.tensor("average_shap/f2").value(8)[0] == pytest.approx(shap[:, 2].mean(), abs=1e-6)
    assert not trial.has_tensor("average_shap/bias")


def test_shap_names_the_character_class_would_drop_are_kept(tmp_path: Path) -> None:
    names = ["alpha", "bmi", "f2", "gas"]
    dtrain, dval = _data(names=names)
    hook = Hook(out_dir=tmp_path / "t", include_collections=["average_shap", "full_shap"], train_data=dtrain)
    _train(hook, rounds=2, data=(dtrain, dval))
    trial = create_trial(str(tmp_path / "t"))
    assert sorted(trial.tensor_names(collection="average_shap")) == [f"average_shap/{n}" for n in names]
    assert len(trial.tensor_names(collection="full_shap")) == 4


def test_gblinear_has_no_trees_and_no_importance_and_does_not_break(tmp_path: Path) -> None:
    hook = Hook(out_dir=tmp_path / "t", include_collections=["trees", "feature_importance", "metrics"])
    _train(hook, rounds=3, params={"booster": "gblinear", "objective": "reg:squarederror", "nthread": 1})
    assert hook.guard.error is None
    trial = create_trial(str(tmp_path / "t"))
    assert trial.tensor_names() == ["train-rmse", "validation-rmse"]


def test_multiclass_parallel_trees_are_the_current_rounds(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    x = rng.normal(size=(90, 3))
    y = np.digitize(x[:, 0], [-0.4, 0.4])
    dtrain = xgb.DMatrix(x, label=y)
    hook = Hook(out_dir=tmp_path / "t", include_collections=["trees"], save_config=SaveConfig(save_interval=2))
    xgb.train({"objective": "multi:softmax", "num_class": 3, "num_parallel_tree": 2, "nthread": 1},
              dtrain, num_boost_round=3, callbacks=[hook])
    trial = create_trial(str(tmp_path / "t"))
    assert sorted(set(trial.tensor("trees/Tree").value(2).tolist())) == list(range(12, 18))
    ids = trial.tensor("trees/ID").value(2)
    assert "12-0" in ids.tolist() and "17-0" in ids.tolist()


def test_cv_saves_metric_mean_and_std(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    dtrain, _ = _data()
    hook = Hook(out_dir=tmp_path / "t", include_collections=["metrics", "trees"], save_config=SaveConfig(save_interval=2))
    with caplog.at_level(logging.WARNING, logger="murphy.hook"):
        res = xgb.cv(PARAMS, dtrain, num_boost_round=4, nfold=3, callbacks=[hook], seed=0)
    assert hook.guard.error is None
    trial = create_trial(str(tmp_path / "t"))
    assert trial.steps() == [0, 2]
    v = trial.tensor("test-logloss").value(2)
    assert v.shape == (2,)
    assert v[0] == pytest.approx(res["test-logloss-mean"][2]) and v[1] == pytest.approx(res["test-logloss-std"][2])
    assert "xgboost.cv" in caplog.text


def test_sklearn_api(tmp_path: Path) -> None:
    sklearn = pytest.importorskip("sklearn") if not os.environ.get("CI") else __import__("sklearn")
    assert sklearn
    rng = np.random.default_rng(2)
    x = rng.normal(size=(100, 3))
    y = (x[:, 1] > 0).astype(int)
    hook = Hook(out_dir=tmp_path / "t", include_collections=["metrics", "feature_importance"],
                save_config=SaveConfig(save_interval=3))
    clf = xgb.XGBClassifier(n_estimators=7, max_depth=2, n_jobs=1, callbacks=[hook])
    clf.fit(x[:80], y[:80], eval_set=[(x[80:], y[80:])], verbose=False)
    trial = create_trial(str(tmp_path / "t"))
    assert trial.steps() == [0, 3, 6]
    # smdebug's metric regexes miss the scikit-learn API's eval names; murphy claims them by name.
    assert "validation_0-logloss" in trial.tensor_names(collection="metrics")
    assert "validation_0-logloss" in trial.tensor_names(collection="losses")
    assert trial.has_tensor("feature_importance/weight/f1")
    assert (tmp_path / "t" / "training_job_end.ts").exists()


def test_a_failing_hook_never_breaks_training(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    dtrain, dval = _data()
    baseline = _train(xgb.callback.TrainingCallback(), rounds=5, data=(dtrain, dval))
    hook = Hook(out_dir=tmp_path / "t", include_collections=["trees"], save_config=SaveConfig(save_interval=1))

    def boom(*_: Any) -> None:
        raise RuntimeError("disk on fire")

    hook._write_trees = boom  # type: ignore[method-assign]
    with caplog.at_level(logging.ERROR, logger="murphy.hook"):
        bst = _train(hook, rounds=5, data=(dtrain, dval))
    assert not hook.enabled and isinstance(hook.guard.error, RuntimeError)
    assert "disk on fire" in caplog.text
    np.testing.assert_array_equal(bst.predict(dval), baseline.predict(dval))


def test_json_config_collection_interval_and_default_ten(tmp_path: Path) -> None:
    cfg = tmp_path / "debughookconfig.json"
    cfg.write_text(json.dumps({
        "LocalPath": str(tmp_path / "t"),
        "HookParameters": {"start_step": "0"},
        "CollectionConfigurations": [
            {"CollectionName": "metrics"},
            {"CollectionName": "feature_importance", "CollectionParameters": {"save_interval": "5"}},
        ],
    }))
    hook = Hook.create_from_json_file(cfg)
    _train(hook, rounds=12)
    trial = create_trial(str(tmp_path / "t"))
    assert trial.tensor("train-logloss").steps() == [0, 10]
    assert trial.tensor("feature_importance/weight/f0").steps() == [0, 5, 10]


def test_csv_train_data_tuple(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    x = rng.normal(size=(40, 3))
    y = (x[:, 0] > 0).astype(float)
    path = tmp_path / "train.csv"
    np.savetxt(path, np.column_stack([y, x]), delimiter=",")
    hook = Hook(out_dir=tmp_path / "t", include_collections=["average_shap"], train_data=(str(path), "text/csv"),
                save_config=SaveConfig(mode_save_configs={ModeKeys.GLOBAL: SaveConfigMode(save_interval=1)}))
    xgb.train({"objective": "binary:logistic", "nthread": 1}, xgb.DMatrix(x, label=y), 2, callbacks=[hook])
    trial = create_trial(str(tmp_path / "t"))
    assert trial.steps() == [0, 1]
    assert trial.tensor_names() == ["average_shap/f0", "average_shap/f1", "average_shap/f2"]


def test_bad_data_argument_is_a_clear_error(tmp_path: Path) -> None:
    from murphy.exceptions import HookError

    with pytest.raises(HookError, match="tuple of strings"):
        Hook(out_dir=tmp_path / "t", train_data=[1, 2])  # type: ignore[arg-type]
    with pytest.raises(HookError, match="local files"):
        Hook(out_dir=tmp_path / "t", validation_data=(str(tmp_path / "nope.csv"), "csv"))


def test_inside_sagemaker_no_end_marker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRAINING_JOB_NAME", "job")
    hook = Hook(out_dir=tmp_path / "t")
    _train(hook, rounds=2)
    assert (tmp_path / "t" / "index").exists()
    assert not (tmp_path / "t" / "training_job_end.ts").exists()


def test_an_unwritable_out_dir_never_breaks_training(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    hook = Hook(out_dir=blocker / "run", save_config=SaveConfig(save_interval=1))
    with caplog.at_level(logging.ERROR, logger="murphy.hook"):
        bst = _train(hook, rounds=4)
    assert bst.num_boosted_rounds() == 4
    assert not hook.enabled and hook.guard.error is not None


def test_json_config_tensorboard_parameters_reach_the_hook(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``HookParameters`` ``export_tensorboard``/``tensorboard_dir`` (smdebug's keys) turn the
    hook's TensorBoard output on, as the constructor arguments do; without them it stays off."""
    monkeypatch.setenv("TENSORBOARD_CONFIG_FILE_PATH", str(tmp_path / "absent.json"))
    for params, logdir in (({"export_tensorboard": "true"}, tmp_path / "a" / "tensorboard"),
                           ({"tensorboard_dir": str(tmp_path / "tb")}, tmp_path / "tb"),
                           ({}, None)):
        out = tmp_path / ("a" if "export_tensorboard" in params else f"t{len(params)}")
        cfg = tmp_path / "debughookconfig.json"
        cfg.write_text(json.dumps({"LocalPath": str(out), "HookParameters": {**params, "save_interval": "1"},
                                   "CollectionConfigurations": [{"CollectionName": "metrics"}]}))
        hook = Hook.create_from_json_file(cfg)
        _train(hook, rounds=2)
        if logdir is None:
            assert hook._writer.tensorboard is None
            continue
        assert sorted(p.name for p in logdir.iterdir()) == ["GLOBAL"], params
        assert any(f.name.startswith("events.out.tfevents.") for f in (logdir / "GLOBAL").iterdir()), params


def test_a_change_during_a_quiet_stretch_takes_effect_at_once(tmp_path: Path) -> None:
    # Rounds between due ones take a counters-only path; a collection changed by another
    # callback in the middle of that stretch must end it at that very round.
    hook = Hook(out_dir=tmp_path / "t")

    class Retune(xgb.callback.TrainingCallback):
        def after_iteration(self, model: Any, epoch: int, evals_log: Any) -> bool:
            if epoch == 3:
                hook.get_collection("metrics").save_config = SaveConfig(save_interval=2)
            return False

    dtrain, dval = _data()
    xgb.train(PARAMS, dtrain, num_boost_round=11, evals=[(dtrain, "train"), (dval, "validation")],
              callbacks=[Retune(), hook], verbose_eval=False)
    assert create_trial(str(tmp_path / "t")).tensor("train-logloss").steps() == [0, 4, 6, 8, 10]
