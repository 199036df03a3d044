"""Cross-check murphy's hand-written codec against real protobuf.

``pb_check.py`` runs in isolated virtualenvs with protobuf 3.20.3 (the last release smdebug's
generated code accepts) and the newest protobuf: it parses murphy's bytes with runtime-built
messages and serializes messages for murphy to parse. The venvs are created on first use under
``.venv-protobuf/`` (or set ``MURPHY_PB_PYTHON`` to ``os.pathsep``-separated interpreters that
have ``google.protobuf``). murphy itself needs no protobuf.
"""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from murphy.core.modes import ModeKeys
from murphy.tensorio.events import decode_tensor_event, encode_tensor_event

ENV_PYTHONS = [p for p in os.environ.get("MURPHY_PB_PYTHON", "").split(os.pathsep) if p]
PYTHONS = ENV_PYTHONS or ["protobuf==3.20.3", "protobuf"]
HELPER = Path(__file__).with_name("pb_check.py")
VENVS = Path(__file__).resolve().parents[3] / ".venv-protobuf"

pytestmark = pytest.mark.compat


def _interpreter(spec: str) -> str:
    """An interpreter path as given, or a cached venv with the named protobuf requirement."""
    if spec in ENV_PYTHONS:
        return spec
    venv = VENVS / spec.replace("==", "-")
    python = venv / "bin" / "python"
    stamp = venv / ".installed"
    if not stamp.exists():
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True, timeout=300)
        subprocess.run(
            [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", spec],
            check=True,
            timeout=600,
        )
        stamp.touch()
    return str(python)

CASES: list[tuple[str, Any, str | None]] = [
    ("w", np.arange(6, dtype=np.float32).reshape(2, 3), None),
    ("loss", np.array(0.5, dtype=np.float64), None),
    ("i8", np.array([-1, 2], dtype=np.int8), None),
    ("u64", np.array([2**64 - 1], dtype=np.uint64), None),
    ("c64", np.array([1 + 2j], dtype=np.complex64), None),
    ("b", np.array([True, False]), None),
    ("s", np.array(["a", "ünï"]), None),
    ("bf", np.array([0x3F80], dtype=np.uint16), "bfloat16"),
    ("gradient/Net_fc1.weight", np.ones((1, 2, 1, 2), dtype=np.float16), None),
]


def run_helper(python: str, request: dict[str, Any]) -> dict[str, Any]:
    proc = subprocess.run(
        [_interpreter(python), str(HELPER)], input=json.dumps(request), capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == 0, proc.stderr
    result: dict[str, Any] = json.loads(proc.stdout)
    return result


@pytest.mark.parametrize("python", PYTHONS)
def test_protobuf_parses_what_murphy_writes(python: str) -> None:
    payloads = [
        encode_tensor_event(n, a, step=2**40 + i, mode=ModeKeys.EVAL, mode_step=i, wall_time=12.25, original_dtype=o)
        for i, (n, a, o) in enumerate(CASES)
    ]
    result = run_helper(python, {"decode": [p.hex() for p in payloads]})
    print("protobuf", result["protobuf"], file=sys.stderr)
    for i, ((name, arr, orig), dec) in enumerate(zip(CASES, result["decoded"], strict=True)):
        assert (dec["wall_time"], dec["step"]) == (12.25, 2**40 + i)
        (value,) = dec["values"]
        assert value["tag"] == name
        expected_plugins = [["mode_step", str(i)], ["mode", "2"]] + ([["murphy_dtype", orig]] if orig else [])
        assert value["plugins"] == expected_plugins
        assert value["has_shape"]
        assert value["shape"] == [[d, f"{name}_{d}"] for d in arr.shape]
        if arr.dtype.kind == "U":
            assert value["dtype"] == 0 and value["content"] == ""
            assert [bytes.fromhex(s).decode() for s in value["string_val"]] == arr.tolist()
        elif orig == "bfloat16":
            assert value["dtype"] == 1
            assert bytes.fromhex(value["content"]) == struct.pack("<f", 1.0)
        else:
            assert bytes.fromhex(value["content"]) == arr.tobytes()


ENCODE_SPECS: list[tuple[dict[str, Any], Any]] = [
    ({"tensor": {"dtype": 1, "float_val": [1.5, -2.0, 3.0]}, "shape": [3]}, np.array([1.5, -2, 3], "f4")),
    ({"tensor": {"dtype": 1, "float_val": [4.0]}, "shape": [2, 2]}, np.full((2, 2), 4.0, "f4")),
    ({"tensor": {"dtype": 2, "double_val": [0.25]}}, np.array(0.25)),
    ({"tensor": {"dtype": 3, "int_val": [-7, 8]}, "shape": [2]}, np.array([-7, 8], "i4")),
    ({"tensor": {"dtype": 6, "int_val": [-128, 127]}, "shape": [2]}, np.array([-128, 127], "i1")),
    ({"tensor": {"dtype": 9, "int64_val": [-(2**62)]}, "shape": [1]}, np.array([-(2**62)], "i8")),
    ({"tensor": {"dtype": 10, "bool_val": [True, False, True]}, "shape": [3]}, np.array([1, 0, 1], "?")),
    ({"tensor": {"dtype": 19, "half_val": [0x3C00, 0xC000]}, "shape": [2]}, np.array([1, -2], "f2")),
    ({"tensor": {"dtype": 8, "scomplex_val": [1.0, 2.0]}, "shape": [1]}, np.array([1 + 2j], "c8")),
    ({"tensor": {"dtype": 18, "dcomplex_val": [3.0, -4.0]}, "shape": [1]}, np.array([3 - 4j], "c16")),
    ({"tensor": {"dtype": 22, "uint32_val": [2**32 - 1]}, "shape": [1]}, np.array([2**32 - 1], "u4")),
    ({"tensor": {"dtype": 23, "uint64_val": [2**64 - 1]}, "shape": [1]}, np.array([2**64 - 1], "u8")),
    (
        {"tensor": {"dtype": 5, "tensor_content": np.array([[1, -2]], "<i2").tobytes().hex()}, "shape": [1, 2]},
        np.array([[1, -2]], "i2"),
    ),
    ({"tensor": {"string_val": [b"ab".hex(), b"".hex()]}, "shape": [2]}, np.array(["ab", ""])),
]


@pytest.mark.parametrize("python", PYTHONS)
def test_murphy_parses_what_protobuf_writes(python: str) -> None:
    specs = []
    for i, (spec, _) in enumerate(ENCODE_SPECS):
        specs.append({"tag": f"t{i}", "step": i, "wall_time": 3.5, "plugins": [["mode", "1"], ["mode_step", "9"]], **spec})
    result = run_helper(python, {"encode": specs})
    for i, ((_, expected), hexdata) in enumerate(zip(ENCODE_SPECS, result["encoded"], strict=True)):
        ev = decode_tensor_event(bytes.fromhex(hexdata))
        assert (ev.name, ev.step, ev.wall_time, ev.mode, ev.mode_step) == (f"t{i}", i, 3.5, ModeKeys.TRAIN, 9)
        assert ev.value.dtype == expected.dtype, i
        assert ev.value.shape == expected.shape and ev.value.tolist() == expected.tolist(), i
