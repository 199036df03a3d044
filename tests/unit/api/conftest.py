"""Fixtures of the API tests (helpers live in apihelp.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from apihelp import Plane, TestClient, make_plane

from murphy.api.app import create_app


@pytest.fixture
def plane(tmp_path: Path) -> Plane:
    return make_plane(tmp_path)


@pytest.fixture
def client(plane: Plane) -> Iterator[TestClient]:
    with TestClient(create_app(plane.service, plane.settings)) as c:
        yield c
