"""Driving smdebug_side/stepper.py (smdebug's hook and trial in the smdebug venv, one command at
a time) from a test, and the stores its runs are written to (a local path, or S3 on moto)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import time
from pathlib import Path
from typing import Any

import compat_harness as h
import pytest
import reader_probe

import servers
from murphy.rules import invoke_rule
from murphy.rules.rule import Rule
from murphy.trial import modes, no_refresh, refresh

MURPHY = reader_probe.Api(modes=modes, no_refresh=no_refresh, refresh=refresh, Rule=Rule, invoke_rule=invoke_rule)


class Stepper:
    """smdebug_side/stepper.py: smdebug's hook and smdebug's trial, one command at a time."""

    def __init__(self, python: str, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(
            [python, str(h.SIDES["smdebug"] / "stepper.py")],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
        )
        self.log: list[str] = []

    def __call__(self, op: str, **kw: Any) -> Any:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        started = time.monotonic()
        self.proc.stdin.write(json.dumps({"op": op, **kw}) + "\n")
        self.proc.stdin.flush()
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise AssertionError("stepper died:\n" + "".join(self.log[-60:]))
            if line.startswith("@@"):
                answer = json.loads(line[2:])
                self.log.append(f"{op}: {time.monotonic() - started:.2f} s\n")
                if not answer["ok"]:
                    raise AssertionError(f"smdebug {op}: {answer['error']}\n{answer['trace']}")
                return answer["result"]
            self.log.append(line)

    def stop(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


class Store:
    """Where a run is written: a local path or s3://bucket/run on moto, with the env for both."""

    def __init__(self, kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
        self.kind = kind
        self.server: servers.S3Server | None = None
        if kind == "local":
            self.uri = str(tmp_path / "trial")
            self.env = h.clean_env()
        else:
            self.server = request.getfixturevalue("moto_server")
            bucket = servers.new_bucket(self.server, prefix="reader")
            self.bucket = bucket
            self.uri = f"s3://{bucket}/run"
            self.env = h.clean_env(self.server.env())


def both(stepper: Stepper, trial: Any, probe: str, **args: Any) -> tuple[Any, Any]:
    mine = reader_probe.PROBES[probe](trial, MURPHY, **args)
    theirs = stepper("probe", name=probe, args=args)
    return json.loads(json.dumps(mine)), theirs


def finished_run(stepper: Stepper, store: Store, steps: int = 4, **hook: Any) -> None:
    stepper("hook", out=store.uri, **hook)
    for _ in range(steps):
        stepper("step")
    stepper("close")


def blank_event_file_names(store: Store) -> None:
    """Rewrite every index file's meta with ``"event_file_name": ""`` (the other spelling)."""
    def fix(data: bytes) -> bytes:
        doc = json.loads(data)
        doc["meta"]["event_file_name"] = ""
        return json.dumps(doc).encode()

    if store.server is None:
        for p in Path(store.uri, "index").rglob("*.json"):
            p.write_bytes(fix(p.read_bytes()))
        return
    client = store.server.client()
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=store.bucket, Prefix="run/index/"):
        for obj in page.get("Contents", []):
            body = client.get_object(Bucket=store.bucket, Key=obj["Key"])["Body"].read()
            client.put_object(Bucket=store.bucket, Key=obj["Key"], Body=fix(body))


def smdebug_modes(smdebug_python: str) -> Any:
    """smdebug's real ``smdebug/core/modes.py`` (it imports only enum), loaded from its venv."""
    site = subprocess.run(
        [smdebug_python, "-c", "import smdebug.core.modes as m; print(m.__file__)"],
        capture_output=True, text=True, check=True,
    ).stdout.strip().splitlines()[-1]
    spec = importlib.util.spec_from_file_location("smdebug_modes_under_test", site)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.ModeKeys
