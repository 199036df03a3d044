"""The one parser of a ``ManifestFile`` channel's manifest (murphy.container.manifest), and the
readers that rely on it: the container's download, the S3 gateway's grants, the Docker mounts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from murphy.container import manifest
from murphy.container.inputs import InputError, download_channel
from murphy.jobs.plane import _manifest_prefixes
from murphy.runtimes.base import Channel, TrainingPlan
from murphy.runtimes.docker_grants import bucket_mounts
from murphy.settings import Settings

GOOD = json.dumps([{"prefix": "s3://b/images/"}, "a/1.png", "2.png"])
#: Each not a manifest, and why (what the container's download fails with).
BAD = {
    "not json": "is not valid JSON",
    json.dumps({"prefix": "s3://b/images/"}): "must be a JSON list",
    json.dumps([]): "must be a JSON list",
    json.dumps([{"prefix": 7}, "a"]): "must be a JSON list",
    json.dumps(["s3://b/images/", "a"]): "must be a JSON list",
    json.dumps([{"prefix": "s3://b/images/"}, "../escape"]): "bad entry '../escape'",
    json.dumps([{"prefix": "s3://b/images/"}, "a//b"]): "bad entry 'a//b'",
    json.dumps([{"prefix": "s3://b/images/"}, 3]): "bad entry 3",
}


def test_a_manifest_is_its_prefix_and_its_entries_in_order() -> None:
    assert manifest.parse(GOOD, "s3://b/m.json") == manifest.Manifest("s3://b/images/", ("a/1.png", "2.png"))
    assert manifest.parse(GOOD.encode(), "s3://b/m.json").prefix == "s3://b/images/"
    assert manifest.parse(json.dumps([{"prefix": "s3://b/p/"}]), "u").entries == ()  # no entries: nothing to fetch


@pytest.mark.parametrize("text", list(BAD))
def test_what_is_not_a_manifest_is_refused_with_the_reason(text: str) -> None:
    with pytest.raises(manifest.ManifestError, match=BAD[text]) as e:
        manifest.parse(text, "s3://b/m.json")
    assert "manifest s3://b/m.json" in str(e.value)


def _plan(uri: str) -> TrainingPlan:
    return TrainingPlan(container_name="a-training", job_name="a", image="img", hyperparameters={}, environment={},
                        instance_type="ml.m5.large", instance_count=1, output_uri="s3://b/out/a/output",
                        channels=(Channel("m", uri, data_type="ManifestFile"),))


@pytest.mark.parametrize("text", [GOOD, *BAD])
def test_the_grants_and_the_download_agree_on_what_a_manifest_is(text: str, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """A job may read a manifest's prefix exactly when its container would download from it: the
    S3 gateway's grants (read through the service's store) and the Docker runtime's mounts alike."""
    buckets = tmp_path / "buckets"
    (buckets / "b" / "images" / "a").mkdir(parents=True)
    (buckets / "b" / "images" / "a" / "1.png").write_bytes(b"1")
    (buckets / "b" / "images" / "2.png").write_bytes(b"2")
    (buckets / "b" / "m.json").write_text(text)
    monkeypatch.setenv("MURPHY_S3_LOCAL_ROOT", str(buckets))  # the container's view of the local buckets
    try:
        n = download_channel({"name": "m", "uri": "s3://b/m.json", "data_type": "ManifestFile"}, str(tmp_path / "dest"))
    except InputError:
        n = None
    downloads = n is not None
    assert n == (2 if text == GOOD else None)
    gateway = _manifest_prefixes(Settings(data_dir=tmp_path, object_store="local", buckets_dir=buckets))
    assert gateway("s3://b/m.json") == (["s3://b/images/"] if downloads else [])
    mounted = {m["bind"] for m in bucket_mounts(_plan("s3://b/m.json"), buckets).values()}
    assert ("/murphy/buckets/b/images" in mounted) == downloads and "/murphy/buckets/b/m.json" in mounted
