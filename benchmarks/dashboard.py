"""The dashboard: a 100,000-step loss series and a 1,000-layer gradient heatmap, murphy's /v1
endpoints and first paint in headless Debian chromium, beside TensorBoard's own server on the
same data (when the browser venv, infra/ci/browser_venv.sh, has it).

murphy: the app (``create_app``) on uvicorn in this process, real HTTP from this process; the
trials are written with murphy's writer where the jobs' hooks would put them, with the step
manifest as the hook writes it (``--no-manifest``: index files only, as smdebug's hook leaves
them). Cold = the first series request on a fresh server (a fresh trial cache: it opens the
trial and reads every step), ``--cold-rounds`` fresh servers, median wall time and median CPU
seconds of this process during the request (the client thread only waits: CPU time survives a
loaded machine, wall time does not); warm = p50/p99 of ``--requests`` requests (full range and
random zoom windows, px=1000). TensorBoard: ``murphy tensorboard export`` of the same trial,
``tensorboard --logdir`` (2.21, --load_fast=false); its first load is from starting it until its
scalars endpoint returns every point (wall, and the CPU seconds of its process), then its
endpoint is timed like murphy's. First paint: navigation start to the loss chart's first frame
(murphy's page marks it), median of 3 page loads.

usage: python benchmarks/dashboard.py [--steps 100000] [--layers 1000] [--heat-steps 60]
                                      [--requests 200] [--cold-rounds 3] [--no-manifest]
                                      [--no-browser] [--no-tensorboard]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _common import REPO, machine, table  # noqa: E402

BUCKET, HOOK = "bench", "s3://bench/hook"
PAINT = """
import json, sys, statistics
from playwright.sync_api import sync_playwright
url, what, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
flags = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage"]
probe = {"loss": "() => { const c = window.murphyPage && window.murphyPage.charts.get('loss'); return c && c.paintedAt; }",
         "heatmap": "() => window.murphyPage && window.murphyPage.heatmapAt"}[what]
out = []
with sync_playwright() as p:
    b = p.chromium.launch(executable_path="/usr/bin/chromium", headless=True, args=flags)
    for _ in range(n):
        page = b.new_page(viewport={"width": 1280, "height": 900})
        page.goto(url)
        page.wait_for_function(probe, timeout=120000)
        out.append(page.evaluate(probe.replace("() => ", "(() => ") + ")()"))
        page.close()
    b.close()
print(json.dumps({"ms": out}))
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def get(url: str, timeout: float = 600) -> bytes:
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return bytes(r.read())


def timed(url: str) -> float:
    t = time.perf_counter()
    get(url)
    return (time.perf_counter() - t) * 1000


def pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, math.ceil(q / 100 * len(s)) - 1)]


def write_trials(root: Path, steps: int, layers: int, heat_steps: int, manifest: bool = True) -> None:
    from murphy.core import Collection, CollectionsDoc, ModeKeys
    from murphy.storage import LocalObjectStore
    from murphy.tensorio.manifest import ManifestWriter
    from murphy.tensorio.writer import StepWriter, write_collections, write_end_of_training

    class Step(StepWriter):
        """StepWriter that also packs its index file into the step manifest, as the hook does."""

        packer: ManifestWriter | None = None

        def close(self) -> None:
            super().close()
            if self.packer is not None and self.index_bytes is not None:
                self.packer.add(self.index_file_name, self.step, self.index_bytes)

    def packer(store: LocalObjectStore) -> ManifestWriter | None:
        if not manifest:
            return None
        mw = ManifestWriter(store, "worker_0")
        mw.begin()
        return mw

    loss = LocalObjectStore(str(root / "hook" / "loss-100k" / "debug-output"))
    write_collections(loss, CollectionsDoc({"losses": Collection("losses", tensor_names=["loss"])}, 1), "worker_0")
    Step.packer = packer(loss)
    rng = np.random.default_rng(0)
    noise = rng.standard_normal(steps) * 0.01
    for s in range(steps):
        v = 1.0 / math.sqrt(s + 1) + noise[s]
        if s == int(steps * 0.7321):
            v = 1e4  # one spike: a sampled chart drops it, a min/max bucket cannot
        if s >= int(steps * 0.95):
            v = math.nan
        with Step(loss, s, "worker_0", ModeKeys.TRAIN, s) as w:
            w.add("loss", np.float32(v))
    if Step.packer is not None:
        Step.packer.flush()
    write_end_of_training(loss)
    grads = LocalObjectStore(str(root / "hook" / "grads-1000" / "debug-output"))
    names = [f"gradient/layer{i:04d}.weight" for i in range(layers)]
    write_collections(grads, CollectionsDoc({"gradients": Collection("gradients", tensor_names=names),
                                             "losses": Collection("losses", tensor_names=["loss"])}, 1), "worker_0")
    Step.packer = packer(grads)
    for s in range(heat_steps):
        with Step(grads, s, "worker_0", ModeKeys.TRAIN, s) as w:
            w.add("loss", np.float32(1.0 / (s + 1)))
            for i, n in enumerate(names):
                w.add(n, (rng.standard_normal(4) * 10.0 ** (-(i % 7))).astype(np.float32))
    if Step.packer is not None:
        Step.packer.flush()
    write_end_of_training(grads)


def serve(data_dir: Path) -> tuple[str, Any]:
    import uvicorn

    from murphy.api.app import create_app
    from murphy.jobs.service import JobService
    from murphy.runtimes.fake import FakeRuntime
    from murphy.settings import Settings
    from murphy.store.memory import InMemoryJobStore

    settings = Settings(data_dir=data_dir, runtime="fake")
    service = JobService(InMemoryJobStore(), FakeRuntime(), settings)
    for name in ("loss-100k", "grads-1000"):
        service.create_training_job({
            "TrainingJobName": name, "RoleArn": "arn:aws:iam::123456789012:role/R",
            "AlgorithmSpecification": {"TrainingImage": "bench", "TrainingInputMode": "File"},
            "OutputDataConfig": {"S3OutputPath": f"s3://{BUCKET}/out"},
            "ResourceConfig": {"InstanceType": "ml.m5.xlarge", "InstanceCount": 1, "VolumeSizeInGB": 1},
            "StoppingCondition": {"MaxRuntimeInSeconds": 60},
            "DebugHookConfig": {"S3OutputPath": HOOK, "CollectionConfigurations": []},
        }, account="123456789012", region="us-west-2")
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(create_app(service, settings), host="127.0.0.1", port=port,
                                           log_level="warning", access_log=False))
    threading.Thread(target=server.run, daemon=True).start()
    base = f"http://127.0.0.1:{port}"
    for _ in range(200):
        try:
            get(base + "/healthz", 1)
            break
        except OSError:
            time.sleep(0.05)
    return base, server


def series_urls(base: str, steps: int, n: int) -> list[str]:
    rnd = random.Random(1)
    out = []
    for i in range(n):
        if i % 2 == 0:
            out.append(f"{base}/v1/training-jobs/loss-100k/series?tensor=loss&px=1000")
        else:
            a = rnd.randrange(0, steps - 10)
            out.append(f"{base}/v1/training-jobs/loss-100k/series?tensor=loss&px=1000&x0={a}&x1={min(steps, a + rnd.randrange(10, steps // 4))}")
    return out


def proc_cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process and its waited-for children (/proc/PID/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = sum(int(x) for x in fields[11:15])  # utime stime cutime cstime
    return ticks / os.sysconf("SC_CLK_TCK")


def cold_series(work: Path, rounds: int) -> tuple[list[float], list[float], Any]:
    """The first series request on ``rounds`` fresh servers (each a fresh trial cache): wall ms
    and CPU seconds of this process while it ran; returns the last server, still serving."""
    walls: list[float] = []
    cpus: list[float] = []
    server = None
    for _ in range(rounds):
        if server is not None:
            server.should_exit = True
        base, server = serve(work)
        c = time.process_time()
        walls.append(timed(f"{base}/v1/training-jobs/loss-100k/series?tensor=loss&px=1000"))
        cpus.append(time.process_time() - c)
    return walls, cpus, (base, server)


def browser_python() -> str | None:
    if not Path("/usr/bin/chromium").exists():
        return None
    proc = subprocess.run(["bash", str(REPO / "infra/ci/browser_venv.sh")], capture_output=True, text=True)
    return proc.stdout.strip().splitlines()[-1] if proc.returncode == 0 else None


def paint(py: str, url: str, what: str) -> list[float]:
    proc = subprocess.run([py, "-c", PAINT, url, what, "3"], capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        sys.exit(f"paint measurement failed:\n{proc.stderr[-3000:]}")
    return list(json.loads(proc.stdout.strip().splitlines()[-1])["ms"])


def tensorboard(py: str, trial: Path, work: Path, steps: int, requests: int) -> dict[str, Any]:
    from murphy.trial import create_trial
    from murphy.ui.tbexport import export_once

    logdir = work / "tb"
    t = time.perf_counter()
    export_once(create_trial(str(trial)), str(logdir))
    export_s = time.perf_counter() - t
    port = free_port()
    tb = Path(py).parent / "tensorboard"
    proc = subprocess.Popen([str(tb), "--logdir", str(logdir), "--port", str(port), "--host", "127.0.0.1",
                             "--load_fast=false", "--reload_interval", "1"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    url = f"http://127.0.0.1:{port}/data/plugin/scalars/scalars?run=TRAIN&tag=losses%2Floss"
    try:
        t = time.perf_counter()
        points: list[Any] = []
        while time.perf_counter() - t < 600:
            try:
                points = json.loads(get(url, 30))
                if points and points[-1][1] == steps - 1:
                    break
            except (OSError, ValueError):
                pass
            time.sleep(0.2)
        load_s = time.perf_counter() - t
        load_cpu = proc_cpu_s(proc.pid)
        times = [timed(url) for _ in range(requests)]
        spike = any(p[2] is not None and p[2] > 1e3 for p in points if isinstance(p[2], float))
        return {"export_s": export_s, "load_s": load_s, "load_cpu_s": load_cpu, "points": len(points), "p50": pct(times, 50),
                "p99": pct(times, 99), "spike_kept": spike}
    finally:
        proc.terminate()
        proc.wait(30)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=100_000)
    ap.add_argument("--layers", type=int, default=1000)
    ap.add_argument("--heat-steps", type=int, default=60)
    ap.add_argument("--requests", type=int, default=200)
    ap.add_argument("--cold-rounds", type=int, default=3)
    ap.add_argument("--no-manifest", action="store_true")
    ap.add_argument("--no-browser", action="store_true")
    ap.add_argument("--no-tensorboard", action="store_true")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="murphy-dashboard-bench-"))
    try:
        print(f"machine: {machine()}")
        t = time.perf_counter()
        write_trials(work / "buckets" / BUCKET, args.steps, args.layers, args.heat_steps, not args.no_manifest)
        print(f"wrote the trials in {time.perf_counter() - t:.1f} s ({args.steps} loss steps; "
              f"{args.layers} layers x {args.heat_steps} steps; step manifest: {not args.no_manifest})")
        cold_walls, cold_cpus, (base, server) = cold_series(work, max(1, args.cold_rounds))
        cold_ms, cold_cpu = statistics.median(cold_walls), statistics.median(cold_cpus)
        doc = json.loads(get(f"{base}/v1/training-jobs/loss-100k/series?tensor=loss&px=1000"))
        spike = max(v for v in doc["max"] if v is not None) >= 1e4
        warm = [timed(u) for u in series_urls(base, args.steps, args.requests)]
        heat_url = f"{base}/v1/training-jobs/grads-1000/heatmap?regex=gradient&px=1000"
        cold_heat = timed(heat_url)
        heat = [timed(heat_url) for _ in range(max(10, args.requests // 10))]
        rows = [
            [f"murphy series ({args.steps} steps, px=1000)", f"{cold_ms / 1000:.1f} s", f"{cold_cpu:.1f} s",
             f"{pct(warm, 50):.1f}", f"{pct(warm, 99):.1f}",
             f"{len(doc['steps'])} buckets; spike kept: {spike}; NaN runs: {len(doc['nonfinite'])}; cold rounds: "
             + ", ".join(f"{w / 1000:.1f} s / {c:.1f} s CPU" for w, c in zip(cold_walls, cold_cpus, strict=True))],
            [f"murphy heatmap ({args.layers} layers)", f"{cold_heat / 1000:.1f} s", "", f"{pct(heat, 50):.1f}", f"{pct(heat, 99):.1f}", ""],
        ]
        py = None if args.no_browser and args.no_tensorboard else browser_python()
        paints: dict[str, list[float]] = {}
        if py and not args.no_browser:
            paints["loss"] = paint(py, f"{base}/ui/jobs/loss-100k", "loss")
            paints["heatmap"] = paint(py, f"{base}/ui/jobs/grads-1000", "heatmap")
        if py and not args.no_tensorboard:
            tbr = tensorboard(py, work / "buckets" / BUCKET / "hook" / "loss-100k" / "debug-output", work,
                              args.steps, args.requests)
            rows.append(["TensorBoard 2.21 scalars (same data)", f"{tbr['load_s']:.1f} s (load)", f"{tbr['load_cpu_s']:.1f} s",
                         f"{tbr['p50']:.1f}", f"{tbr['p99']:.1f}",
                         f"{tbr['points']} points (reservoir); spike kept: {tbr['spike_kept']}; "
                         f"export {tbr['export_s']:.1f} s"])
            rows.append(["ratio TensorBoard / murphy", f"{tbr['load_s'] * 1000 / cold_ms:.2f}x",
                         f"{tbr['load_cpu_s'] / max(cold_cpu, 1e-9):.2f}x", f"{tbr['p50'] / pct(warm, 50):.2f}x",
                         f"{tbr['p99'] / pct(warm, 99):.2f}x", ""])
        print(table(["endpoint", "cold (first load)", "cold CPU", "p50 ms", "p99 ms", "notes"], rows))
        for what, ms in paints.items():
            print(f"first paint, {what} page (median of 3, ms since navigation start): {statistics.median(ms):.0f} "
                  f"(runs: {', '.join(f'{m:.0f}' for m in ms)})")
        verdict = pct(warm, 99) <= 100 and all(statistics.median(ms) <= 1000 for ms in paints.values())
        print(f"targets (series p99 <= 100 ms, first paint <= 1 s): {'met' if verdict else 'NOT met'}")
        server.should_exit = True
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
