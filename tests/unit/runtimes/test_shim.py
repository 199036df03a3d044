"""The shim, run as the runtime runs it: own session, real child processes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest


def start(tmp_path: Path, *argv: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "murphy.runtimes.shim", "--log", str(tmp_path / "log.jsonl"),
         "--exit", str(tmp_path / "exit.json"), "--", *argv],
        start_new_session=True,
    )


def lines(tmp_path: Path) -> list[dict[str, object]]:
    return [json.loads(x) for x in (tmp_path / "log.jsonl").read_text().splitlines()]


def wait_for_line(tmp_path: Path, text: str, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if (tmp_path / "log.jsonl").exists() and any(d["m"] == text for d in lines(tmp_path)):
            return
        time.sleep(0.02)
    raise AssertionError(f"{text!r} never logged")


def test_merged_output_partial_lines_and_bad_bytes(tmp_path: Path) -> None:
    before = int(time.time() * 1000)
    p = start(tmp_path, "sh", "-c", r"echo one; printf '\377two\r\n'; echo three >&2; printf 'partial'; exit 3")
    assert p.wait(timeout=10) == 3
    got = lines(tmp_path)
    assert [d["m"] for d in got] == ["one", "\ufffdtwo", "three", "partial"]
    assert all(isinstance(d["t"], int) and before <= d["t"] <= int(time.time() * 1000) for d in got)
    ended = json.loads((tmp_path / "exit.json").read_text())
    assert (ended["exit_code"], ended["signal"]) == (3, None) and ended["ended_at"] <= time.time()


def test_sigterm_to_the_group_reaches_the_child_and_output_keeps_flowing(tmp_path: Path) -> None:
    code = ("import signal, sys, time\n"
            "signal.signal(signal.SIGTERM, lambda *a: (print('got TERM', flush=True), time.sleep(0.2), print('bye', flush=True), sys.exit(7)))\n"
            "print('ready', flush=True)\n"
            "time.sleep(30)\n")
    p = start(tmp_path, sys.executable, "-c", code)
    wait_for_line(tmp_path, "ready")
    os.killpg(p.pid, signal.SIGTERM)
    assert p.wait(timeout=10) == 7
    assert [d["m"] for d in lines(tmp_path)][-2:] == ["got TERM", "bye"]
    assert json.loads((tmp_path / "exit.json").read_text())["exit_code"] == 7


def test_child_killed_by_a_signal(tmp_path: Path) -> None:
    p = start(tmp_path, "sh", "-c", "echo ready; exec sleep 30")
    wait_for_line(tmp_path, "ready")
    os.killpg(p.pid, signal.SIGTERM)
    assert p.wait(timeout=10) == 128 + signal.SIGTERM
    ended = json.loads((tmp_path / "exit.json").read_text())
    assert (ended["exit_code"], ended["signal"]) == (None, signal.SIGTERM)


def test_leftovers_holding_the_output_are_killed_when_the_child_ends(tmp_path: Path) -> None:
    t0 = time.monotonic()
    p = start(tmp_path, "sh", "-c", "sleep 60 & echo started; exit 0")
    assert p.wait(timeout=10) == 0
    assert time.monotonic() - t0 < 5
    assert [d["m"] for d in lines(tmp_path)] == ["started"]


def test_a_command_that_cannot_start(tmp_path: Path) -> None:
    p = start(tmp_path, str(tmp_path / "no-such-program"))
    assert p.wait(timeout=10) == 127
    assert "cannot start" in str(lines(tmp_path)[0]["m"])
    assert json.loads((tmp_path / "exit.json").read_text())["exit_code"] == 127


@pytest.mark.parametrize("argv", [[], ["--log", "x", "--", "true"], ["--log", "x", "--exit", "y", "--"]])
def test_usage_errors(tmp_path: Path, argv: list[str]) -> None:
    proc = subprocess.run([sys.executable, "-m", "murphy.runtimes.shim", *argv], capture_output=True, cwd=tmp_path, timeout=10)
    assert proc.returncode != 0 and b"usage" in proc.stderr
