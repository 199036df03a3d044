"""``murphy kubernetes render``'s YAML: one document per object, read back exactly."""

from __future__ import annotations

from typing import Any

import yaml

from murphy.cli.kubernetes import to_yaml


def test_round_trip_keeps_every_string_exactly() -> None:
    tricky = ["{\n \"a\": 1\n}", "trailing space \nnext", "no newline", "", "yes", "0123", "1e3", "null", "- x",
              "tab\there\n", "\u00e9t\u00e9\n", "#comment", "a: b", "'quoted'\n\"too\""]
    objs: list[dict[str, Any]] = [{"kind": "ConfigMap", "data": {f"k{i}": s for i, s in enumerate(tricky)}},
                                  {"kind": "Job", "spec": {"n": 0, "b": False, "l": [0]}}]
    text = to_yaml(objs)
    assert list(yaml.safe_load_all(text)) == objs
    assert text.count("\n---\n") == 1
    assert "|-\n    {\n     \"a\": 1\n    }" in text  # config files stay readable
