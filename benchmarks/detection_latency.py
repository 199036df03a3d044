"""Detection latency of ExplodingTensor on a live run, murphy vs the real smdebug 1.0.34.

Per trial: a training process (benchmarks/_rules_train.py: murphy's StepWriter, one step every
50 ms, 4 weights + 4 gradients of 8x8 float32, gradients non-finite from step ``--bad-step``)
and a rule process watch the same fresh trial location:
- murphy: the real CLI, ``murphy rule-eval`` with ``rule_to_invoke=ExplodingTensor``, default
  ``--poll-interval`` (0.1 s), result in a local folder. Detected = when this script sees
  ``result.json`` (polled every 5 ms) with ``IssuesFound`` at the bad step.
- smdebug: ``invoke_rule(rule, raise_eval_cond=True)`` on an ExplodingTensor-like custom rule
  (``np.isfinite`` over every tensor at the step) in the smdebug venv, ``create_trial`` defaults
  (2 s between looks); one process per store runs the trials one after another (import once).
  Detected = when ``invoke_rule`` raises RuleEvaluationConditionMet.
Process start-up is excluded: the training process holds the bad step back until the rule
process has evaluated every earlier step (murphy: its heartbeat, every 50 ms here, shows
``last_step = bad - 1``; smdebug: the rule touches a file at that step), then waits a random
0..``--jitter`` s (default 2 s, smdebug's polling period) so the bad step lands at a random phase
of either poller's cycle. Latency = detected - wall-clock time right after the bad step's index
file was put. Stores: local folder, then S3 on a SeaweedFS started by this script (smdebug gets
the one-line SeaweedFS listing workaround, see docs/compat.md).

usage: python benchmarks/detection_latency.py [--trials 20] [--no-s3] [--only murphy|smdebug]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _common import REPO, machine, smdebug_python, table  # noqa: E402

TRAIN = str(HERE / "_rules_train.py")
WORKER = str(HERE / "_rules_worker.py")
MURPHY = str(Path(sys.executable).parent / "murphy")
TARGET_P95 = {"local": 1.0, "s3": 3.0}


def _wait(cond: Any, timeout: float, what: str, procs: list[subprocess.Popen[str]]) -> float:
    deadline = time.monotonic() + timeout
    while True:
        if cond():
            return time.time()
        for p in procs:
            if p.poll() is not None:
                out, err = p.communicate()
                raise RuntimeError(f"{what}: {p.args!r} exited {p.returncode}:\n{out[-2000:]}\n{err[-2000:]}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what}: timed out after {timeout} s")
        time.sleep(0.005)


def _json_file(path: Path) -> dict[str, Any] | None:
    try:
        doc: dict[str, Any] = json.loads(path.read_text())
        return doc
    except (OSError, ValueError):
        return None


def _iso(ts: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp()


class Trial:
    """One measurement: training + rule process on a fresh trial location."""

    def __init__(self, cfg: argparse.Namespace, impl: str, uri: str, work: Path, env: dict[str, str],
                 seed: int, smdebug: subprocess.Popen[str] | None) -> None:
        self.cfg, self.impl, self.uri, self.work, self.env = cfg, impl, uri, work, env
        self.seed, self.smdebug = seed, smdebug
        work.mkdir(parents=True)

    def _start_rule(self) -> subprocess.Popen[str]:
        """murphy: a fresh ``murphy rule-eval``; smdebug: one more request to the loop process."""
        if self.smdebug is not None:
            assert self.smdebug.stdin is not None
            request = {"trial": self.uri, "ready_file": str(self.work / "ready"),
                       "ready_step": self.cfg.bad_step - 1}
            self.smdebug.stdin.write(json.dumps(request) + "\n")
            self.smdebug.stdin.flush()
            return self.smdebug
        cmd = [MURPHY, "rule-eval", "--rule-parameters", json.dumps({"rule_to_invoke": "ExplodingTensor"}),
               "--base-trial", self.uri, "--result-dir", str(self.work / "result"),
               "--heartbeat-interval", "0.05"]
        with open(self.work / "rule-eval.log", "w") as log:  # a file, so a chatty log never blocks it
            return subprocess.Popen(cmd, env=self.env, stdout=log, stderr=subprocess.STDOUT, text=True)

    def _ready(self) -> bool:
        if self.impl == "smdebug":
            return (self.work / "ready").exists()
        beat = _json_file(self.work / "result" / "heartbeat.json")
        return beat is not None and beat.get("last_step") == self.cfg.bad_step - 1

    def run(self) -> dict[str, Any]:
        go, stop = self.work / "go", self.work / "stop"
        train = subprocess.Popen(
            [sys.executable, TRAIN, self.uri, "--bad-step", str(self.cfg.bad_step), "--go-file", str(go),
             "--stop-file", str(stop), "--jitter", str(self.cfg.jitter), "--seed", str(self.seed)],
            env=self.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        rule = self._start_rule()
        try:
            _wait(self._ready, 120, "rule process ready", [train, rule])
            go.touch()
            result = self._detect(rule, train)
        finally:
            stop.touch()
            for p in (train,) if rule is self.smdebug else (rule, train):
                try:
                    p.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    p.kill()
        out, err = train.communicate()
        if train.returncode != 0:
            raise RuntimeError(f"training process failed:\n{err[-2000:]}")
        visible = json.loads(out.strip().splitlines()[-1])["visible"]
        result["latency"] = result["detected"] - visible
        if "ended_at" in result:
            result["latency_ended_at"] = result["ended_at"] - visible
        return result

    def _detect(self, rule: subprocess.Popen[str], train: subprocess.Popen[str]) -> dict[str, Any]:
        if self.impl == "murphy":
            path = self.work / "result" / "result.json"
            detected = _wait(path.exists, 120, "murphy result.json", [train])
            doc = _json_file(path) or {}
            step, status = doc.get("step"), doc.get("status")
            extra = {"ended_at": _iso(doc["ended_at"])} if doc.get("ended_at") else {}
        else:
            assert rule.stdout is not None
            line = rule.stdout.readline()
            while line and not line.startswith("{"):  # smdebug logs to stdout too
                line = rule.stdout.readline()
            if not line:
                raise RuntimeError(f"smdebug rule process failed ({rule.poll()}): {line}")
            doc = json.loads(line)
            detected, step, extra = doc["detected"], doc["step"], {}
            status = "IssuesFound" if detected is not None else "NoIssuesFound"
        if status != "IssuesFound" or step != self.cfg.bad_step:
            raise RuntimeError(f"{self.impl}: expected IssuesFound at step {self.cfg.bad_step}, got {doc}")
        return {"detected": detected, **extra}


def measure_store(cfg: argparse.Namespace, label: str, uri_for: Any, tmp: Path, env: dict[str, str],
                  sm_py: str, sm_extra: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {"store": label}
    for impl in cfg.impls:
        loop = None
        if impl == "smdebug":  # stderr to a file: smdebug logs a lot and a full pipe would block it
            log = open(tmp / f"smdebug-{label}.log", "w")  # noqa: SIM115 - closed below
            loop = subprocess.Popen([sm_py, WORKER, "--impl", "smdebug", "--mode", "latency-loop", *sm_extra],
                                    env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, text=True)
        lat, lat_end = [], []
        try:
            for i in range(cfg.trials):
                name = f"{impl}-{label}-{i}"
                r = Trial(cfg, impl, uri_for(name), tmp / name, env, i, loop).run()
                lat.append(r["latency"])
                if "latency_ended_at" in r:
                    lat_end.append(r["latency_ended_at"])
                print(f"{label} {impl} #{i}: {r['latency'] * 1000:.0f} ms", file=sys.stderr)
        finally:
            if loop is not None:
                assert loop.stdin is not None
                loop.stdin.close()
                loop.wait(timeout=30)
                log.close()
        out[impl] = {"latencies": lat, "latencies_ended_at": lat_end}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trials", type=int, default=20, help="trials per store and implementation")
    ap.add_argument("--bad-step", type=int, default=10)
    ap.add_argument("--jitter", type=float, default=2.0)
    ap.add_argument("--only", choices=["murphy", "smdebug"])
    ap.add_argument("--no-s3", action="store_true")
    ap.add_argument("--json", type=Path)
    cfg = ap.parse_args()
    cfg.impls = [cfg.only] if cfg.only else ["murphy", "smdebug"]
    sm_py = smdebug_python() if "smdebug" in cfg.impls else ""
    tmp = Path(tempfile.mkdtemp(prefix="murphy-latency-bench-"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "MURPHY_S3"))}
    results = []
    t0 = time.monotonic()
    try:
        results.append(measure_store(cfg, "local", lambda n: str(tmp / "stores" / n), tmp, env, sm_py, []))
        if not cfg.no_s3:
            sys.path.insert(0, str(REPO / "tests"))
            import servers

            server = servers.start("seaweedfs")
            try:
                bucket = servers.new_bucket(server, prefix="latency")
                results.append(measure_store(cfg, "s3", lambda n: f"s3://{bucket}/{n}", tmp,
                                             {**env, **server.env()}, sm_py, ["--seaweedfs-workaround"]))
            finally:
                server.stop()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    report(results, cfg, time.monotonic() - t0)


def _pct(xs: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(xs), q))


def report(results: list[dict[str, Any]], cfg: argparse.Namespace, elapsed: float) -> None:
    rows, verdicts = [], []
    for r in results:
        row = [r["store"]]
        stats: dict[str, tuple[float, float]] = {}
        for impl in ("murphy", "smdebug"):
            if impl in r:
                lat = r[impl]["latencies"]
                stats[impl] = (_pct(lat, 50), _pct(lat, 95))
                row += [f"{stats[impl][0] * 1000:.0f}", f"{stats[impl][1] * 1000:.0f}"]
            else:
                row += ["-", "-"]
        if "murphy" in r and r["murphy"]["latencies_ended_at"]:
            row.append(f"{_pct(r['murphy']['latencies_ended_at'], 95) * 1000:.0f}")
        else:
            row.append("-")
        if len(stats) == 2:
            row += [f"{stats['smdebug'][0] / stats['murphy'][0]:.1f}x", f"{stats['smdebug'][1] / stats['murphy'][1]:.1f}x"]
        else:
            row += ["-", "-"]
        rows.append(row)
        if "murphy" in stats:
            p95, target = stats["murphy"][1], TARGET_P95[r["store"]]
            ok = p95 <= target and (len(stats) < 2 or stats["smdebug"][1] / p95 >= 5)
            verdicts.append(f"{r['store']}: murphy p95 {p95:.2f} s (target ≤ {target:g} s, ≥ 5x smdebug) → "
                            f"{'OK' if ok else 'MISSED'}")
    print(f"detection latency (ExplodingTensor) — {machine()}, {cfg.trials} trials per store, bad step "
          f"{cfg.bad_step}, 50 ms/step, jitter 0..{cfg.jitter:g} s, {time.strftime('%Y-%m-%d')}, {elapsed:.0f} s")
    print(table(["store", "murphy p50 ms", "murphy p95 ms", "smdebug p50 ms", "smdebug p95 ms",
                 "murphy p95 ms (ended_at)", "p50 ratio", "p95 ratio"], rows))
    for v in verdicts:
        print(v)
    if cfg.json:
        cfg.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
