"""Pipe input mode: the feeder on real FIFOs and real files (``file://`` stores), a reader in
another thread or process as a training script would be; and the toolkit running a job whose
program reads its Pipe channel beside a File one."""

from __future__ import annotations

import gzip
import json
import os
import stat
import struct
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from murphy.container.env import OptMl
from murphy.container.inputs import HostShard, InputError, pipe_source
from murphy.container.pipes import RECORDIO_MAGIC, PipeFeeder, PipeSource, object_chunks, recordio
from murphy.container.toolkit import Toolkit
from murphy.storage import open_store


def read_fifo(path: str, timeout: float = 10.0) -> bytes:
    """``path`` read to EOF by a plain ``open()`` (the next epoch's FIFO may only appear at EOF)."""
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.01)
    with open(path, "rb") as f:
        return f.read()


def bucket(tmp_path: Path, objects: dict[str, bytes]) -> Path:
    root = tmp_path / "bucket" / "train"
    root.mkdir(parents=True)
    for key, data in objects.items():
        (root / key).parent.mkdir(parents=True, exist_ok=True)
        (root / key).write_bytes(data)
    return root


@pytest.fixture
def feeder_of(tmp_path: Path) -> Iterator[object]:
    made: list[PipeFeeder] = []
    errors: list[str] = []

    def make(source: PipeSource, **kw: object) -> PipeFeeder:
        f = PipeFeeder(source, str(tmp_path / "data"), errors.append, **kw)  # type: ignore[arg-type]
        made.append(f)
        f.start()
        return f

    make.errors = errors  # type: ignore[attr-defined]
    yield make
    for f in made:
        f.stop()
        assert not f.is_alive()


OBJECTS = {"b.bin": b"B" * 100_000, "a.bin": b"first", "sub/c.bin": bytes(range(256)) * 9, "empty": b""}


def test_epochs_stream_the_channel_in_key_order_each_time(tmp_path: Path, feeder_of: object) -> None:
    root = bucket(tmp_path, OBJECTS)
    source = pipe_source({"name": "train", "uri": root.as_uri(), "input_mode": "Pipe"})
    assert source.keys == ("a.bin", "b.bin", "empty", "sub/c.bin")
    f = feeder_of(source, chunk=4096)  # type: ignore[operator]
    data = tmp_path / "data"
    assert stat.S_ISFIFO(os.stat(data / "train_0").st_mode)  # there when start() returns
    assert not (data / "train").exists()  # no channel directory in Pipe mode
    whole = b"".join(OBJECTS[k] for k in sorted(OBJECTS))
    for epoch in range(3):
        assert read_fifo(str(data / f"train_{epoch}")) == whole
        assert (data / f"train_{epoch + 1}").exists()  # already there at EOF: a plain open() works
    deadline = time.monotonic() + 5
    while f.epochs_done < 3 or (data / "train_2").exists():
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert sorted(os.listdir(data)) == ["train_3"]  # finished epochs' FIFOs are gone
    f.stop()
    assert os.listdir(data) == [] and not f.is_alive()
    assert feeder_of.errors == []  # type: ignore[attr-defined]


def test_an_empty_share_gives_empty_epochs(tmp_path: Path, feeder_of: object) -> None:
    source = PipeSource("train", open_store(str(tmp_path)), ())
    feeder_of(source)  # type: ignore[operator]
    assert [read_fifo(str(tmp_path / "data" / f"train_{e}")) for e in range(2)] == [b"", b""]


def test_an_empty_channel_is_an_input_error_as_in_file_mode(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"channel 'train': no objects at .*nothing"):
        pipe_source({"name": "train", "uri": (tmp_path / "nothing").as_uri(), "input_mode": "Pipe"})


def test_a_reader_that_closes_early_gets_the_next_epoch_whole(tmp_path: Path, feeder_of: object) -> None:
    root = bucket(tmp_path, {"big": os.urandom(1 << 20)})
    feeder_of(pipe_source({"name": "train", "uri": root.as_uri()}), chunk=65536)  # type: ignore[operator]
    with open(tmp_path / "data" / "train_0", "rb") as f:
        assert len(f.read(1000)) == 1000
    assert read_fifo(str(tmp_path / "data" / "train_1")) == (root / "big").read_bytes()


def test_an_object_that_cannot_be_read_is_reported_and_ends_the_epoch(tmp_path: Path, feeder_of: object) -> None:
    root = bucket(tmp_path, {"a": b"x" * 10, "b": b"y" * 10})
    source = pipe_source({"name": "train", "uri": root.as_uri()})
    (root / "b").unlink()  # listed when the job started, gone when its turn comes
    f = feeder_of(source)  # type: ignore[operator]
    assert read_fifo(str(tmp_path / "data" / "train_0")) == b"x" * 10  # EOF: the job is told first
    f.join(5)
    assert not f.is_alive()
    (message,) = feeder_of.errors  # type: ignore[attr-defined]
    assert message == f"channel 'train' (Pipe input mode): cannot stream {root.as_uri()}/b: the object does not exist"
    assert not (tmp_path / "data" / "train_1").exists()


def test_stop_without_a_reader_returns_promptly(tmp_path: Path, feeder_of: object) -> None:
    f = feeder_of(PipeSource("train", open_store(str(tmp_path)), ("x",)))  # type: ignore[operator]
    t0 = time.monotonic()
    f.stop()
    assert time.monotonic() - t0 < 2 and not f.is_alive()
    assert not (tmp_path / "data" / "train_0").exists()


def test_sharded_pipe_streams_this_hosts_share(tmp_path: Path) -> None:
    root = bucket(tmp_path, {k: k.encode() for k in ("a", "b", "c", "d", "e")})
    ch = {"name": "train", "uri": root.as_uri(), "distribution": "ShardedByS3Key", "input_mode": "Pipe"}
    hosts = ("algo-1", "algo-2")
    assert [pipe_source(ch, HostShard(h, hosts)).keys for h in hosts] == [("a", "c", "e"), ("b", "d")]


def test_manifest_pipe_streams_its_entries_in_its_order(tmp_path: Path) -> None:
    root = bucket(tmp_path, {"x": b"1", "y": b"2", "z": b"3"})
    manifest = tmp_path / "m.manifest"
    manifest.write_text(json.dumps([{"prefix": root.as_uri() + "/"}, "z", "x"]))
    source = pipe_source({"name": "train", "uri": manifest.as_uri(), "data_type": "ManifestFile"})
    assert source.keys == ("z", "x")


def parse_recordio(data: bytes) -> list[bytes]:
    """A reader of RecordIO as PipeModeDataset's: multi-part records (flags 1, 2, 3) joined."""
    out, pos, current = [], 0, b""
    while pos < len(data):
        magic, word = struct.unpack_from("<II", data, pos)
        assert magic == RECORDIO_MAGIC
        flag, size = word >> 29, word & ((1 << 29) - 1)
        pos += 8
        current += data[pos:pos + size]
        pos += size + (-size % 4)
        if flag in (0, 3):
            out.append(current)
            current = b""
    return out


@pytest.mark.parametrize("size", [0, 1, 4095, 4096, 4097, 3 * 4096, 10_000])
def test_recordio_wraps_each_object_in_one_record(tmp_path: Path, size: int) -> None:
    store = open_store(str(tmp_path))
    store.put("o", os.urandom(size))
    framed = b"".join(recordio(object_chunks(store, "o", 4096)))
    assert parse_recordio(framed) == [store.get("o")] and len(framed) % 4 == 0


def test_recordio_and_gzip_channels(tmp_path: Path, feeder_of: object) -> None:
    root = bucket(tmp_path, {"1.gz": gzip.compress(b"one" * 5000), "2.gz": gzip.compress(b"two") + gzip.compress(b"!")})
    ch = {"name": "train", "uri": root.as_uri(), "record_wrapper": "RecordIO", "compression": "Gzip"}
    feeder_of(pipe_source(ch), chunk=1024)  # type: ignore[operator]
    assert parse_recordio(read_fifo(str(tmp_path / "data" / "train_0"))) == [b"one" * 5000, b"two!"]


def test_a_non_gzip_object_in_a_gzip_channel_is_reported(tmp_path: Path, feeder_of: object) -> None:
    root = bucket(tmp_path, {"plain": b"not gzip at all"})
    f = feeder_of(pipe_source({"name": "train", "uri": root.as_uri(), "compression": "Gzip"}))  # type: ignore[operator]
    read_fifo(str(tmp_path / "data" / "train_0"))
    f.join(5)
    (message,) = feeder_of.errors  # type: ignore[attr-defined]
    assert message.startswith("channel 'train' (Pipe input mode): plain is not gzip data (CompressionType Gzip)")


# --- the toolkit ------------------------------------------------------------------------------

READER = r'''
import os, sys
data, out = sys.argv[1], sys.argv[2]
got = {}
for epoch in (0, 1):
    with open(os.path.join(data, "train_%d" % epoch), "rb") as f:
        got[epoch] = f.read()
with open(os.path.join(data, "files", "f.txt"), "rb") as f:
    got["file"] = f.read()
with open(out, "wb") as f:
    f.write(got[0] + b"|" + got[1] + b"|" + got["file"])
'''


def toolkit_job(tmp_path: Path, channels: list[dict[str, str]], script: str) -> tuple[OptMl, Path]:
    opt_ml = OptMl(str(tmp_path / "job" / "opt" / "ml"))
    for d in opt_ml.layout():
        Path(d).mkdir(parents=True, exist_ok=True)
    out = tmp_path / "out.bin"
    Path(opt_ml.config_file("hyperparameters.json")).write_text("{}")
    Path(opt_ml.config_file("murphy.json")).write_text(json.dumps({
        "kind": "command", "command": [sys.executable, "-c", script, opt_ml.data_dir, str(out)], "channels": channels}))
    return opt_ml, out


def test_the_toolkit_feeds_a_pipe_channel_beside_a_file_channel(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("MURPHY_STAGE_FILE", str(tmp_path / "stage.json"))
    root = bucket(tmp_path, {"1": b"ab", "2": b"cd"})
    files = tmp_path / "bucket" / "files"
    files.mkdir()
    (files / "f.txt").write_bytes(b"file!")
    opt_ml, out = toolkit_job(tmp_path, [{"name": "train", "uri": root.as_uri(), "input_mode": "Pipe"},
                                         {"name": "files", "uri": files.as_uri(), "input_mode": "File"}], READER)
    assert Toolkit(opt_ml).run() == 0, capsys.readouterr().out
    assert out.read_bytes() == b"abcd|abcd|file!"
    assert os.listdir(opt_ml.data_dir) == ["files"]  # the feeder is stopped and its FIFOs gone
    assert not [t for t in threading.enumerate() if t.name.startswith("murphy-pipe-")]
    log = capsys.readouterr().out
    assert "channel train: Pipe input mode, 2 object(s)" in log and "channel train: 2 epoch(s) streamed" in log


def _toolkit_that_loses_an_object(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, root: Path,
                                  program: str) -> tuple[OptMl, Toolkit]:
    """A Pipe-mode job over ``root`` whose object ``2`` goes away after the channel was listed."""
    opt_ml, _ = toolkit_job(tmp_path, [{"name": "train", "uri": root.as_uri(), "input_mode": "Pipe"}], program)
    toolkit = Toolkit(opt_ml)
    real = toolkit.download

    def download_then_lose_an_object() -> None:
        real()
        (root / "2").unlink()

    monkeypatch.setattr(toolkit, "download", download_then_lose_an_object)
    return opt_ml, toolkit


def test_a_feeder_error_fails_the_job_with_its_reason(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MURPHY_STAGE_FILE", str(tmp_path / "stage.json"))
    root = bucket(tmp_path, {"1": b"ab", "2": b"cd"})
    # The program reads forever; it is stopped when the object listed at start cannot be read.
    forever = "import os, sys, time\nf = open(os.path.join(sys.argv[1], 'train_0'), 'rb')\nf.read()\ntime.sleep(60)\n"
    opt_ml, toolkit = _toolkit_that_loses_an_object(tmp_path, monkeypatch, root, forever)
    t0 = time.monotonic()
    assert toolkit.run() != 0
    assert time.monotonic() - t0 < 30
    assert Path(opt_ml.failure_file).read_text() == (
        f"channel 'train' (Pipe input mode): cannot stream {root.as_uri()}/2: the object does not exist")


# --- the plan: each channel's mode, as inputdataconfig.json and murphy.json carry it ------------


def test_inputdataconfig_says_each_channels_own_mode() -> None:
    from murphy.jobs.model import JobRecord
    from murphy.jobs.plans import training_plan
    from murphy.runtimes.layout import input_data_config

    def ch(name: str, **extra: str) -> dict[str, object]:
        return {"ChannelName": name, "DataSource": {"S3DataSource": {
            "S3DataType": "S3Prefix", "S3Uri": f"s3://b/{name}", "S3DataDistributionType": "FullyReplicated"}}, **extra}

    spec = {"AlgorithmSpecification": {"TrainingImage": "murphy/python:latest", "TrainingInputMode": "Pipe"},
            "ResourceConfig": {"InstanceType": "ml.m5.xlarge", "InstanceCount": 1},
            "OutputDataConfig": {"S3OutputPath": "s3://b/out"},
            "InputDataConfig": [ch("train", RecordWrapperType="RecordIO", CompressionType="Gzip", ContentType="text/csv",
                                   ShuffleConfig={"Seed": 42}),
                                ch("files", InputMode="File"), ch("fast", InputMode="FastFile")]}
    plan = training_plan(JobRecord(name="j", arn="arn", account="123456789012", region="us-west-2", spec=spec,
                                   creation_time=0.0))
    assert input_data_config(plan) == {
        "train": {"TrainingInputMode": "Pipe", "S3DistributionType": "FullyReplicated", "RecordWrapperType": "RecordIO",
                  "CompressionType": "Gzip", "ContentType": "text/csv"},
        "files": {"TrainingInputMode": "File", "S3DistributionType": "FullyReplicated", "RecordWrapperType": "None"},
        "fast": {"TrainingInputMode": "FastFile", "S3DistributionType": "FullyReplicated", "RecordWrapperType": "None"},
    }
    assert [(c.input_mode, c.shuffle_seed) for c in plan.channels] == [("Pipe", 42), ("File", None), ("FastFile", None)]


def test_a_feeder_error_fails_the_job_even_if_the_program_ends_well(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    # The program reads epoch 0 to its (short) EOF and exits 0 at once: the job fails all the same,
    # because the feeder tells the toolkit before it lets the reader see EOF.
    monkeypatch.setenv("MURPHY_STAGE_FILE", str(tmp_path / "stage.json"))
    root = bucket(tmp_path, {"1": b"ab", "2": b"cd"})
    quick = "import os, sys\nopen(os.path.join(sys.argv[1], 'train_0'), 'rb').read()\n"
    opt_ml, toolkit = _toolkit_that_loses_an_object(tmp_path, monkeypatch, root, quick)
    assert toolkit.run() != 0  # 143 when the SIGTERM reaches the program first, else 1
    assert "cannot stream" in Path(opt_ml.failure_file).read_text()


def test_the_job_is_told_of_an_error_before_the_reader_sees_eof(tmp_path: Path) -> None:
    root = bucket(tmp_path, {"a": b"x", "b": b"y"})
    source = pipe_source({"name": "train", "uri": root.as_uri()})
    (root / "b").unlink()
    eof = threading.Event()
    seen_at_error: list[bool] = []

    def on_error(message: str) -> None:
        time.sleep(0.3)  # a reader that could see EOF would by now
        seen_at_error.append(eof.is_set())

    def reader() -> None:
        read_fifo(str(tmp_path / "data" / "train_0"))
        eof.set()

    f = PipeFeeder(source, str(tmp_path / "data"), on_error)
    f.start()
    t = threading.Thread(target=reader)
    t.start()
    f.join(5)
    t.join(5)
    assert seen_at_error == [False] and eof.is_set()


# --- ShuffleConfig: a new order every epoch, the same on every host ----------------------------


def test_shuffle_config_reorders_each_epoch_and_the_hosts_agree(tmp_path: Path) -> None:
    keys = [f"k{i:02d}" for i in range(20)]
    root = bucket(tmp_path, {k: k.encode() for k in keys})
    ch = {"name": "train", "uri": root.as_uri(), "distribution": "ShardedByS3Key", "shuffle_seed": 7}
    hosts = ("algo-1", "algo-2", "algo-3")
    sources = [pipe_source(ch, HostShard(h, hosts)) for h in hosts]
    orders = []
    for epoch in range(4):
        shares = [s.epoch_keys(epoch) for s in sources]
        flat = [k for share in shares for k in share]
        assert sorted(flat) == keys  # disjoint, and together the whole channel, every epoch
        orders.append(shares)
    assert len({tuple(o[0]) for o in orders}) == 4  # algo-1's share differs from epoch to epoch
    # Deterministic: the same seed, the same orders (another process would compute the same).
    again = pipe_source(ch, HostShard("algo-1", hosts))
    assert [again.epoch_keys(e) for e in range(4)] == [o[0] for o in orders]
    other_seed = pipe_source({**ch, "shuffle_seed": 8}, HostShard("algo-1", hosts))
    assert [other_seed.epoch_keys(e) for e in range(4)] != [o[0] for o in orders]
    # Without ShuffleConfig: the sorted share, every epoch the same.
    plain = pipe_source({**ch, "shuffle_seed": None}, HostShard("algo-1", hosts))
    assert plain.epoch_keys(0) == plain.epoch_keys(3) == tuple(keys[0::3])


def test_a_shuffled_pipe_streams_each_epoch_in_its_order(tmp_path: Path, feeder_of: object) -> None:
    keys = [f"k{i}" for i in range(8)]
    root = bucket(tmp_path, {k: f"<{k}>".encode() for k in keys})
    source = pipe_source({"name": "train", "uri": root.as_uri(), "shuffle_seed": 1})
    feeder_of(source)  # type: ignore[operator]
    for epoch in range(3):
        got = read_fifo(str(tmp_path / "data" / f"train_{epoch}"))
        assert got == b"".join(f"<{k}>".encode() for k in source.epoch_keys(epoch))
    assert source.epoch_keys(0) != source.epoch_keys(1) and sorted(source.epoch_keys(0)) == keys
