"""Pipe input mode vs File input mode on the same channel (murphy.container.pipes vs inputs).

One channel of ``--objects`` objects of ``--mib`` MiB each in a store (a temporary ``file://``
directory by default; ``--uri s3://bucket/prefix`` for S3, with the usual AWS_* variables). Per
round, interleaved (the machine's load hits both alike):

- File: ``download_channel`` into a temporary directory, then a reader reads every file in key
  order (1 MiB reads), as a File-mode script would;
- Pipe: a ``PipeFeeder`` streams the channel into ``train_0`` and a reader thread reads the FIFO
  to EOF (1 MiB reads), as a Pipe-mode script would.

Figures: time until the program can read its first byte (File: the whole download; Pipe: the
first read returning), time until it has read every byte, the toolkit's peak Python heap
(tracemalloc, reader included) and the bytes staged on disk. Medians over the rounds; the ratio
column is Pipe / File. The bytes read are checked equal (CRC-32) every round.

usage: python benchmarks/pipe_input.py [--rounds 5] [--objects 16] [--mib 4] [--uri URI]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
import tracemalloc
import zlib
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _common import load_average, machine, table  # noqa: E402
from murphy.container.inputs import download_channel, pipe_source  # noqa: E402
from murphy.container.pipes import PipeFeeder  # noqa: E402
from murphy.storage import open_store  # noqa: E402

READ = 1 << 20


def read_all(f: object, t0: float, first: list[float]) -> tuple[int, int]:
    size, crc = 0, 0
    while True:
        block = f.read(READ)  # type: ignore[attr-defined]
        if not first:
            first.append(time.perf_counter() - t0)
        if not block:
            return size, crc
        size += len(block)
        crc = zlib.crc32(block, crc)


def file_round(channel: dict[str, str], keys: list[str], work: str) -> dict[str, float]:
    dest = os.path.join(work, "files")
    tracemalloc.start()
    t0 = time.perf_counter()
    download_channel(channel, dest)
    first: list[float] = []
    size, crc = 0, 0
    for key in keys:
        with open(os.path.join(dest, *key.split("/")), "rb") as f:
            n, crc_part = 0, crc
            while True:
                block = f.read(READ)
                if not first:
                    first.append(time.perf_counter() - t0)
                if not block:
                    break
                n += len(block)
                crc_part = zlib.crc32(block, crc_part)
            size, crc = size + n, crc_part
    total = time.perf_counter() - t0
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    staged = sum(p.stat().st_size for p in Path(dest).rglob("*") if p.is_file())
    shutil.rmtree(dest)
    return {"first": first[0], "total": total, "peak": peak, "staged": staged, "size": size, "crc": crc}


def pipe_round(channel: dict[str, str], work: str) -> dict[str, float]:
    data = os.path.join(work, "data")
    errors: list[str] = []
    tracemalloc.start()
    t0 = time.perf_counter()
    feeder = PipeFeeder(pipe_source(channel), data, errors.append)
    feeder.start()
    first: list[float] = []
    with open(os.path.join(data, "train_0"), "rb") as f:
        size, crc = read_all(f, t0, first)
    total = time.perf_counter() - t0
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    # Before stop() cleans up: a feeder that spooled the channel anywhere under the job's
    # directory would show here (a FIFO is no file and holds nothing).
    staged = sum(p.stat().st_size for p in Path(work).rglob("*") if p.is_file())
    feeder.stop()
    assert not errors, errors
    return {"first": first[0], "total": total, "peak": peak, "staged": staged, "size": size, "crc": crc}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--objects", type=int, default=16)
    ap.add_argument("--mib", type=float, default=4.0)
    ap.add_argument("--uri", default=None, help="where the channel is written (default: a temporary file:// dir)")
    args = ap.parse_args()

    tmp = tempfile.mkdtemp(prefix="murphy-pipe-bench-")
    try:
        uri = args.uri or Path(tmp, "bucket", "train").as_uri()
        store = open_store(uri)
        keys = [f"part-{i:04d}.bin" for i in range(args.objects)]
        blob = os.urandom(int(args.mib * (1 << 20)))
        for i, key in enumerate(keys):
            store.put(key, bytes([i % 256]) + blob[1:])
        channel = {"name": "train", "uri": uri}
        rows: dict[str, list[dict[str, float]]] = {"File": [], "Pipe": []}
        for r in range(args.rounds):
            order = ("File", "Pipe") if r % 2 == 0 else ("Pipe", "File")
            for mode in order:
                work = tempfile.mkdtemp(dir=tmp)
                rows[mode].append(file_round(channel, keys, work) if mode == "File" else pipe_round(channel, work))
        f0, p0 = rows["File"][0], rows["Pipe"][0]
        assert all(x["size"] == f0["size"] and x["crc"] == f0["crc"] for x in rows["File"] + rows["Pipe"]), "bytes differ"
        assert p0["size"] == args.objects * len(blob)

        def med(mode: str, k: str) -> float:
            return statistics.median(x[k] for x in rows[mode])

        mib = f0["size"] / (1 << 20)
        print(f"# pipe_input: {args.objects} objects x {args.mib:g} MiB = {mib:.0f} MiB from {uri.split('://')[0]}://, "
              f"{args.rounds} interleaved rounds; {machine()}; {load_average()}")
        out = []
        for label, key, scale, unit in (("first byte readable", "first", 1e3, "ms"), ("all bytes read", "total", 1e3, "ms"),
                                        ("peak Python heap", "peak", 1 / (1 << 20), "MiB"),
                                        ("staged on disk", "staged", 1 / (1 << 20), "MiB")):
            fv, pv = med("File", key) * scale, med("Pipe", key) * scale
            ratio = f"{pv / fv:.3f}" if fv else "-"
            out.append([label, f"{fv:.1f} {unit}", f"{pv:.1f} {unit}", ratio])
        out.append(["throughput (all bytes)", f"{mib / med('File', 'total'):.0f} MiB/s",
                    f"{mib / med('Pipe', 'total'):.0f} MiB/s", f"{med('File', 'total') / med('Pipe', 'total'):.3f}"])
        print(table(["median", "File", "Pipe", "Pipe/File"], out))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
