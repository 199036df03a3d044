"""The dashboard routes on a control plane with the fake runtime (tests/unit/api's helpers), with
tensors written by tensorio's real writer where the job's hook would put them."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "api"))

from apihelp import Plane, TestClient, make_plane

from murphy.api.app import create_app


@pytest.fixture
def plane(tmp_path: Path) -> Plane:
    return make_plane(tmp_path)


@pytest.fixture
def client(plane: Plane) -> Iterator[TestClient]:
    with TestClient(create_app(plane.service, plane.settings)) as c:
        yield c
