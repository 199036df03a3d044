"""The XGBoost hook's pure parts: tree dump parsing, metric names, booster type, data files."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from murphy.hook.xgboost_names import as_array, booster_name, metric_items, parse_tree_dump

DUMP = """0:[f0<0.5] yes=1,no=2,missing=1,gain=10.5,cover=20
\t1:leaf=0.3,cover=12
\t2:[alpha:{1,3}] yes=3,no=4,missing=4,gain=2,cover=8
\t\t3:leaf=-0.1,cover=5
\t\t4:leaf=0.2,cover=3
"""


def test_parse_tree_dump_columns_like_trees_to_dataframe() -> None:
    t = parse_tree_dump([DUMP, "0:leaf=0.5,cover=1\n"], first_tree=6)
    assert t["Tree"].tolist() == [6, 6, 6, 6, 6, 7] and t["Tree"].dtype == np.int64
    assert t["Node"].tolist() == [0, 1, 2, 3, 4, 0]
    assert t["ID"].tolist() == ["6-0", "6-1", "6-2", "6-3", "6-4", "7-0"]
    assert t["Feature"].tolist() == ["f0", "Leaf", "alpha", "Leaf", "Leaf", "Leaf"]
    assert t["Yes"].tolist()[:3] == ["6-1", "nan", "6-3"] and t["Missing"][0] == "6-1"
    assert t["Split"][0] == 0.5 and np.isnan(t["Split"][1]) and np.isnan(t["Split"][2])
    assert t["Category"].tolist()[:3] == ["nan", "nan", "1,3"]
    assert t["Gain"].tolist() == [10.5, 0.3, 2.0, -0.1, 0.2, 0.5]
    assert t["Cover"].dtype == np.float64 and t["Cover"][0] == 20.0


def test_metric_items_and_arrays() -> None:
    log = {"train": {"rmse": [3.0, 2.0]}, "test": {"rmse": [(2.5, 0.1)]}, "x": {"auc": []}}
    assert metric_items(log) == [("train-rmse", 2.0), ("test-rmse", (2.5, 0.1))]
    assert as_array(2.0).shape == (1,) and as_array("s").dtype.kind == "U"
    assert as_array((2.5, 0.1)).shape == (2,)
    with pytest.raises(TypeError):
        as_array(None)


def test_booster_name() -> None:
    assert booster_name(json.dumps({"learner": {"gradient_booster": {"name": "gblinear"}}})) == "gblinear"


def test_data_files_and_content_types(tmp_path: Path) -> None:
    if os.environ.get("CI"):  # CI installs xgboost: fail, never skip, there
        from murphy.hook import xgboost_data as xgb_data
    else:
        xgb_data = pytest.importorskip("murphy.hook.xgboost_data")
    assert xgb_data.content_type("text/csv; label_size=1") == "csv"
    assert xgb_data.content_type(None) == "libsvm"
    with pytest.raises(xgb_data.DataError, match="is not an accepted ContentType"):
        xgb_data.content_type("application/json")
    (tmp_path / "a.csv").write_text("1,0.5,2\n0,0.1,3\n")
    (tmp_path / "_SUCCESS").write_text("")
    assert [p.name for p in xgb_data.data_files(tmp_path)] == ["a.csv"]
    x, y = xgb_data.load_csv(xgb_data.data_files(tmp_path))
    assert y.tolist() == [1.0, 0.0] and x.shape == (2, 2)
    (tmp_path / "b.libsvm").write_text("1 1:0.5 2:3\n")
    with pytest.raises(xgb_data.DataError, match="is not 'CSV' format"):
        xgb_data.load_csv([tmp_path / "b.libsvm"])
    with pytest.raises(xgb_data.DataError, match="is not 'LIBSVM' format"):
        xgb_data.load_dmatrix(tmp_path / "a.csv", "libsvm")
    d = xgb_data.load_dmatrix(tmp_path / "b.libsvm", "text/libsvm")
    assert d.num_row() == 1 and d.get_label().tolist() == [1.0]
