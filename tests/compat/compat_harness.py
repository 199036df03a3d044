"""Subprocess plumbing for the compatibility tests: the smdebug venv, multi-worker training runs,
trial dumps by either implementation, S3 downloads."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import trial_dump

from murphy.core.ports import free_port

COMPAT_DIR = Path(__file__).resolve().parent
REPO = COMPAT_DIR.parents[1]
VENV_SCRIPT = REPO / "infra" / "ci" / "smdebug_venv.sh"
SIDES = {"smdebug": COMPAT_DIR / "smdebug_side", "murphy": COMPAT_DIR / "murphy_side"}
WORKERS = 2

Dump = tuple[dict[str, Any], dict[str, Any]]


def ensure_smdebug_venv() -> str:
    """Create (once) the smdebug 1.0.34 venv; return its python."""
    proc = subprocess.run(["bash", str(VENV_SCRIPT)], capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        raise RuntimeError(f"smdebug venv creation failed:\n{proc.stdout}\n{proc.stderr}")
    return proc.stdout.strip().splitlines()[-1]


def clean_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The test process's environment without S3 settings, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "MURPHY_S3", "SMDEBUG_"))}
    # smdebug's reader sleeps this long after it sees the end marker; the runs are finished.
    env["SMDEBUG_TRAINING_END_DELAY_REFRESH"] = "0"
    env["PYTHONHASHSEED"] = "0"
    env.update(extra or {})
    return env


def _check(proc: subprocess.CompletedProcess[str] | subprocess.Popen[str], out: str, what: str) -> None:
    if proc.returncode != 0:
        raise AssertionError(f"{what} exited {proc.returncode}:\n{out[-6000:]}")


def train(side: str, python: str, out_dir: str, truth_dir: Path, env: dict[str, str], timeout: float = 240) -> None:
    """Run tests/compat/workload.py as WORKERS gloo ranks with ``side``'s hook."""
    port = str(free_port())
    procs = []
    for rank in range(WORKERS):
        wenv = dict(env, RANK=str(rank), WORLD_SIZE=str(WORKERS), MASTER_ADDR="127.0.0.1", MASTER_PORT=port)
        procs.append(
            subprocess.Popen(
                [python, str(SIDES[side] / "train.py"), out_dir, str(truth_dir)],
                env=wenv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            )
        )
    for rank, p in enumerate(procs):
        try:
            out, _ = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            raise
        _check(p, out, f"{side} training rank {rank}")


def dump(side: str, python: str, trial_path: str, out_prefix: Path, env: dict[str, str]) -> Dump:
    """Read ``trial_path`` with ``side``'s create_trial in a subprocess; return the dump."""
    proc = subprocess.run(
        [python, str(SIDES[side] / "dump_trial.py"), trial_path, str(out_prefix)],
        env=env, capture_output=True, text=True, timeout=300,
    )
    _check(proc, proc.stdout + proc.stderr, f"{side} create_trial({trial_path})")
    return trial_dump.load(out_prefix)


def download(client: Any, bucket: str, prefix: str, dest: Path) -> Path:
    """Copy every object under ``bucket/prefix/`` to ``dest`` (a byte-identical local trial)."""
    paginator = client.get_paginator("list_objects_v2")
    for page in paginator.paginate(Bucket=bucket, Prefix=prefix.rstrip("/") + "/"):
        for obj in page.get("Contents", []):
            target = dest / obj["Key"][len(prefix.rstrip("/")) + 1 :]
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(client.get_object(Bucket=bucket, Key=obj["Key"])["Body"].read())
    return dest


@dataclass
class Run:
    """A recorded training run: where it is, a local byte copy, and the training's ground truth."""

    writer: str
    uri: str
    local_dir: Path
    truth_dir: Path
    env: dict[str, str] = field(default_factory=dict)
    _dumps: dict[str, Dump] = field(default_factory=dict, repr=False)

    def read(self, reader: str, smdebug_python: str, *, where: str = "uri") -> Dump:
        """``reader``'s dump of this run, at its URI or from its local copy (memoised)."""
        python = smdebug_python if reader == "smdebug" else murphy_python()
        key = f"{reader}:{where}"
        if key not in self._dumps:
            path = self.uri if where == "uri" else str(self.local_dir)
            out = self.truth_dir.parent / f"dump_{reader}_{where}"
            self._dumps[key] = dump(reader, python, path, out, self.env)
        return self._dumps[key]


def murphy_python() -> str:
    return sys.executable
