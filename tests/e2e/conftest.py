"""tests/e2e: the real ``murphy server`` process fixture (``make_server``) comes from
tests/conftest.py; its plumbing lives in tests/murphy_server.py. Re-exported here for tests that
import these names from their conftest."""

from __future__ import annotations

from murphy_server import MurphyServer, free_port, kill_job_processes

__all__ = ["MurphyServer", "free_port", "kill_job_processes"]
