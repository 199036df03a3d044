"""``S3DataDistributionType=ShardedByS3Key``: which host downloads which object (the assignment,
pure), and the toolkit's downloads on real files (``file://`` stores) host by host."""

from __future__ import annotations

import json
import os
import random
import sys
from pathlib import Path
from typing import Any

import pytest

from murphy.container import toolkit as toolkit_module
from murphy.container.env import OptMl
from murphy.container.inputs import HostShard, InputError, download_channel
from murphy.container.toolkit import Toolkit, current_host, read_resource_config


def cluster(n: int) -> list[HostShard]:
    hosts = tuple(f"algo-{i}" for i in range(1, n + 1))
    return [HostShard(h, hosts) for h in hosts]


def files_under(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())


# --- the assignment ------------------------------------------------------------------------


@pytest.mark.parametrize(("n", "count"), [(1, 0), (1, 7), (2, 7), (3, 10), (4, 4), (5, 2), (8, 100), (12, 13)])
def test_every_key_is_on_exactly_one_host_and_shares_differ_by_at_most_one(n: int, count: int) -> None:
    keys = [f"part-{i:05d}.csv" for i in range(count)]
    shares = [h.select(keys) for h in cluster(n)]
    flat = [k for share in shares for k in share]
    assert sorted(flat) == sorted(keys) and len(flat) == len(set(flat))
    sizes = [len(s) for s in shares]
    assert max(sizes) - min(sizes) <= 1
    assert sizes == sorted(sizes, reverse=True)  # the remainder goes to the first hosts


def test_round_robin_over_the_sorted_keys_whatever_the_listing_order() -> None:
    keys = ["d", "a", "e", "c", "b"]
    shuffled = keys[:]
    random.Random(7).shuffle(shuffled)
    a1, a2 = cluster(2)
    assert a1.select(keys) == a1.select(shuffled) == ["a", "c", "e"]
    assert a2.select(keys) == a2.select(shuffled) == ["b", "d"]


def test_one_host_gets_everything() -> None:
    (only,) = cluster(1)
    assert only.select(["b", "a", "c"]) == ["a", "b", "c"]


def test_more_hosts_than_keys_leaves_the_last_hosts_without_data() -> None:
    shares = [h.select(["y.csv", "x.csv"]) for h in cluster(4)]
    assert shares == [["x.csv"], ["y.csv"], [], []]


def test_nested_prefixes_are_keys_like_any_other() -> None:
    """Relative keys at any depth are sorted as whole keys (S3's listing order), so a directory's
    objects are spread over the hosts rather than a directory going to one host."""
    keys = ["b/2.csv", "a/x/1.csv", "a/1.csv", "a/x/0.csv", "b/1.csv", "top.csv"]
    a1, a2, a3 = cluster(3)
    assert a1.select(keys) == ["a/1.csv", "b/1.csv"]
    assert a2.select(keys) == ["a/x/0.csv", "b/2.csv"]
    assert a3.select(keys) == ["a/x/1.csv", "top.csv"]


def test_hosts_keep_their_cluster_order_past_nine() -> None:
    """algo-10 is the tenth host, not the second (hosts are not sorted as strings)."""
    hosts = cluster(10)
    keys = [f"k{i:02d}" for i in range(10)]
    assert [h.select(keys) for h in hosts] == [[k] for k in keys]


def test_duplicate_keys_are_downloaded_once() -> None:
    a1, a2 = cluster(2)
    assert a1.select(["a", "b", "a"]) == ["a"] and a2.select(["a", "b", "a"]) == ["b"]


def test_a_host_outside_the_cluster_is_an_input_error() -> None:
    with pytest.raises(InputError, match="'algo-3' is not one of the job's hosts"):
        HostShard("algo-3", ("algo-1", "algo-2"))


# --- downloads on real files ---------------------------------------------------------------


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    root = tmp_path / "bucket" / "train"
    for rel in ("a.csv", "b.csv", "c.csv", "sub/d.csv", "sub/deeper/e.csv"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(rel)
    return root


def channel(uri: str, distribution: str = "ShardedByS3Key", data_type: str = "S3Prefix") -> dict[str, str]:
    return {"name": "train", "uri": uri, "data_type": data_type, "distribution": distribution}


def test_sharded_prefix_hosts_get_disjoint_shares_that_cover_the_channel(tmp_path: Path, dataset: Path) -> None:
    seen = []
    for host in cluster(2):
        dest = tmp_path / host.current_host
        n = download_channel(channel(dataset.as_uri()), str(dest), host=host)
        got = files_under(dest)
        assert n == len(got)
        assert all((dest / rel).read_text() == rel for rel in got)  # content and relative path kept
        seen.append(got)
    assert seen == [["a.csv", "c.csv", "sub/deeper/e.csv"], ["b.csv", "sub/d.csv"]]


def test_fully_replicated_and_one_host_download_everything(tmp_path: Path, dataset: Path) -> None:
    everything = files_under(dataset)
    for host in cluster(3):
        dest = tmp_path / "full" / host.current_host
        assert download_channel(channel(dataset.as_uri(), "FullyReplicated"), str(dest), host=host) == 5
        assert files_under(dest) == everything
    (only,) = cluster(1)
    assert download_channel(channel(dataset.as_uri()), str(tmp_path / "one"), host=only) == 5
    assert download_channel(channel(dataset.as_uri()), str(tmp_path / "no-host")) == 5  # no cluster: one host
    assert files_under(tmp_path / "one") == files_under(tmp_path / "no-host") == everything


def test_more_hosts_than_objects_the_others_start_with_an_empty_channel(tmp_path: Path, dataset: Path) -> None:
    counts = [download_channel(channel(dataset.as_uri()), str(tmp_path / h.current_host), host=h) for h in cluster(7)]
    assert counts == [1, 1, 1, 1, 1, 0, 0]
    assert (tmp_path / "algo-7").is_dir() and files_under(tmp_path / "algo-7") == []


def test_a_uri_naming_one_object_goes_to_the_first_host(tmp_path: Path, dataset: Path) -> None:
    uri = (dataset / "a.csv").as_uri()
    a1, a2 = cluster(2)
    assert download_channel(channel(uri), str(tmp_path / "1"), host=a1) == 1
    assert download_channel(channel(uri), str(tmp_path / "2"), host=a2) == 0
    assert files_under(tmp_path / "1") == ["a.csv"] and files_under(tmp_path / "2") == []


def test_an_empty_sharded_channel_fails_on_every_host(tmp_path: Path) -> None:
    for host in cluster(2):
        with pytest.raises(InputError, match=r"channel 'train': no objects at .*nothing"):
            download_channel(channel((tmp_path / "nothing").as_uri()), str(tmp_path / host.current_host), host=host)


def test_sharded_manifest_splits_its_entries(tmp_path: Path, dataset: Path) -> None:
    manifest = tmp_path / "bucket" / "train.manifest"
    entries = ["sub/d.csv", "a.csv", "c.csv", "sub/deeper/e.csv"]
    manifest.write_text(json.dumps([{"prefix": dataset.as_uri() + "/"}, *entries]))
    shares = []
    for host in cluster(3):
        dest = tmp_path / host.current_host
        n = download_channel(channel(manifest.as_uri(), data_type="ManifestFile"), str(dest), host=host)
        shares.append(files_under(dest))
        assert n == len(shares[-1])
    assert shares == [["a.csv", "sub/deeper/e.csv"], ["c.csv"], ["sub/d.csv"]]


def test_a_bad_manifest_entry_fails_every_host_not_just_its_owner(tmp_path: Path, dataset: Path) -> None:
    manifest = tmp_path / "bucket" / "bad.manifest"
    manifest.write_text(json.dumps([{"prefix": dataset.as_uri() + "/"}, "a.csv", "b.csv", "../escape"]))
    for host in cluster(2):
        with pytest.raises(InputError, match=r"bad entry '\.\./escape'"):
            download_channel(channel(manifest.as_uri(), data_type="ManifestFile"), str(tmp_path / "x"), host=host)


def test_an_unknown_distribution_is_an_input_error(tmp_path: Path, dataset: Path) -> None:
    with pytest.raises(InputError, match="S3DataDistributionType Striped is not supported"):
        download_channel(channel(dataset.as_uri(), "Striped"), str(tmp_path / "x"), host=cluster(2)[0])


# --- the toolkit: the host comes from resourceconfig.json -----------------------------------


def toolkit_opt_ml(tmp_path: Path, host: str, hosts: list[str], channels: list[dict[str, str]]) -> OptMl:
    opt_ml = OptMl(str(tmp_path / host / "opt" / "ml"))
    for d in opt_ml.layout():
        Path(d).mkdir(parents=True, exist_ok=True)
    Path(opt_ml.config_file("hyperparameters.json")).write_text("{}")
    Path(opt_ml.config_file("resourceconfig.json")).write_text(json.dumps({"current_host": host, "hosts": hosts}))
    Path(opt_ml.config_file("murphy.json")).write_text(json.dumps({
        "kind": "command", "command": [sys.executable, "-c", "pass"], "channels": channels}))
    return opt_ml


def test_the_toolkit_downloads_its_hosts_share(tmp_path: Path, dataset: Path, monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    full = tmp_path / "bucket" / "full"
    full.mkdir()
    (full / "all.txt").write_text("x")
    channels = [channel(dataset.as_uri()), {"name": "full", "uri": full.as_uri(), "distribution": "FullyReplicated"}]
    monkeypatch.setenv("SM_CURRENT_HOST", "algo-1")  # resourceconfig.json wins over the environment
    for host, expected in (("algo-1", ["a.csv", "c.csv", "sub/deeper/e.csv"]), ("algo-2", ["b.csv", "sub/d.csv"])):
        monkeypatch.setenv("MURPHY_STAGE_FILE", str(tmp_path / f"{host}.stage.json"))
        opt_ml = toolkit_opt_ml(tmp_path, host, ["algo-1", "algo-2"], channels)
        assert Toolkit(opt_ml).run() == 0
        assert files_under(Path(opt_ml.channel_dir("train"))) == expected
        assert files_under(Path(opt_ml.channel_dir("full"))) == ["all.txt"]
    out = capsys.readouterr().out
    assert "channel train: 2 object(s) (ShardedByS3Key: algo-2's share, 1 in 2)" in out


def test_current_host_reads_resourceconfig_then_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    opt_ml = toolkit_opt_ml(tmp_path, "algo-2", ["algo-1", "algo-2", "algo-3"], [])
    assert current_host(read_resource_config(opt_ml)) == HostShard("algo-2", ("algo-1", "algo-2", "algo-3"))
    bare = OptMl(str(tmp_path / "bare"))
    monkeypatch.delenv("SM_HOSTS", raising=False)
    monkeypatch.delenv("SM_CURRENT_HOST", raising=False)
    assert read_resource_config(bare) == {}
    assert current_host(read_resource_config(bare)) == HostShard("algo-1", ("algo-1",))
    monkeypatch.setenv("SM_HOSTS", '["algo-1", "algo-2"]')
    monkeypatch.setenv("SM_CURRENT_HOST", "algo-2")
    assert current_host({}) == HostShard("algo-2", ("algo-1", "algo-2"))


def test_the_toolkit_reads_resourceconfig_once(tmp_path: Path, dataset: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Both this host's SM_* values and its share of a sharded channel come from one read.
    monkeypatch.setenv("MURPHY_STAGE_FILE", str(tmp_path / "stage.json"))
    opt_ml = toolkit_opt_ml(tmp_path, "algo-2", ["algo-1", "algo-2"], [channel(dataset.as_uri())])
    reads: list[str] = []
    real = toolkit_module.read_json

    def counting(path: str, default: Any = None) -> Any:
        reads.append(os.path.basename(path))
        return real(path, default)

    monkeypatch.setattr(toolkit_module, "read_json", counting)
    assert Toolkit(opt_ml).run() == 0
    assert files_under(Path(opt_ml.channel_dir("train"))) == ["b.csv", "sub/d.csv"]
    assert reads.count("resourceconfig.json") == 1
