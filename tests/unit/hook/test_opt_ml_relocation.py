"""On murphy's process runtime a job's /opt/ml lives elsewhere ($MURPHY_OPT_ML): a hook whose
out_dir is SageMaker's /opt/ml/... (hard-coded in many scripts, the article's included) writes
into the job's own directory, where the toolkit mirrors tensors from."""

from __future__ import annotations

from pathlib import Path

import pytest

from murphy.hook.base import BaseHook


def test_opt_ml_out_dir_follows_the_jobs_opt_ml(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "job" / "opt" / "ml"
    monkeypatch.setenv("MURPHY_OPT_ML", str(root))
    hook = BaseHook(out_dir="/opt/ml/output/tensors")
    assert hook.out_dir == f"{root}/output/tensors"
    hook.close()
    assert (root / "output" / "tensors" / "training_job_end.ts").exists()


@pytest.mark.parametrize("path", ["/opt/mlx/t", "relative/t", "s3://b/opt/ml/t"])
def test_other_paths_are_left_alone(path: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MURPHY_OPT_ML", str(tmp_path / "root"))
    from murphy.hook.outdir import _relocate_opt_ml

    assert _relocate_opt_ml(path) == path


def test_without_a_relocated_root_nothing_changes(monkeypatch: pytest.MonkeyPatch) -> None:
    from murphy.hook.outdir import _relocate_opt_ml

    monkeypatch.delenv("MURPHY_OPT_ML", raising=False)
    assert _relocate_opt_ml("/opt/ml/output/tensors") == "/opt/ml/output/tensors"
    monkeypatch.setenv("MURPHY_OPT_ML", "/opt/ml")
    assert _relocate_opt_ml("/opt/ml/output/tensors") == "/opt/ml/output/tensors"
