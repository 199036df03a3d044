"""The embedded murphy service: the control plane and its API in a background thread of this process.

``murphy.sdk`` uses it when neither an ``endpoint`` argument nor ``$MURPHY_ENDPOINT`` names a
server, so ``Estimator(...).fit()`` works with nothing else running. It is a real server on
``127.0.0.1:<free port>`` and the SDK talks to it through boto3 like to any other; only this
module imports the service side (``murphy.api``, ``murphy.jobs``, ``murphy.settings``).

One per process (:func:`ensure_started`), stopped at interpreter exit. Its data directory is
``$MURPHY_DATA_DIR`` or ``./.murphy``; ``s3://`` URIs live under ``<data dir>/buckets`` and
``MURPHY_S3_LOCAL_ROOT`` is set in ``os.environ`` so ``create_trial`` and the SDK's uploads in
this process resolve them to the same directories as the service's containers.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import threading
import time
from pathlib import Path
from typing import Any

from murphy.core.ports import free_port

log = logging.getLogger(__name__)

DATA_DIR_ENV = "MURPHY_DATA_DIR"
S3_LOCAL_ROOT_ENV = "MURPHY_S3_LOCAL_ROOT"
#: What ``s3://`` output goes to when the estimator names no output_path.
DEFAULT_BUCKET = "murphy-default"
_TERMINAL = {"Completed", "Failed", "Stopped"}


def default_data_dir() -> Path:
    return Path(os.environ.get(DATA_DIR_ENV) or ".murphy").resolve()


class EmbeddedService:
    """A ControlPlane + uvicorn server on a daemon thread. :meth:`start` blocks until it answers."""

    def __init__(self, data_dir: str | os.PathLike[str] | None = None, *, stop_jobs_timeout_s: float = 15.0) -> None:
        self.data_dir = Path(data_dir).resolve() if data_dir is not None else default_data_dir()
        self.stop_jobs_timeout_s = stop_jobs_timeout_s
        self.port = 0
        self._plane: Any = None
        self._server: Any = None
        self._thread: threading.Thread | None = None
        self._saved_env: dict[str, str | None] = {}

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self, timeout: float = 30.0) -> EmbeddedService:
        import uvicorn

        from murphy.api.app import create_app
        from murphy.jobs.plane import ControlPlane
        from murphy.settings import Settings

        self.port = free_port()
        overrides: dict[str, Any] = {"data_dir": self.data_dir, "host": "127.0.0.1", "port": self.port}
        if os.environ.get(S3_LOCAL_ROOT_ENV):
            # Someone already chose where s3:// lives in this process: the service must agree.
            overrides["buckets_dir"] = Path(os.environ[S3_LOCAL_ROOT_ENV])
        settings = Settings(**overrides)
        self._plane = ControlPlane.from_settings(settings)
        for key, value in settings.container_store_env().items():
            self._saved_env[key] = os.environ.get(key)
            os.environ[key] = value
        self._plane.start()
        app = create_app(self._plane.service, settings, self._plane.bus)
        config = uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning", access_log=False,
                                lifespan="off")
        self._server = uvicorn.Server(config)
        # uvicorn installs signal handlers only on the main thread, so Ctrl-C stays the caller's.
        self._thread = threading.Thread(target=self._server.run, name="murphy-embedded", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self.close()
                raise RuntimeError(f"the embedded murphy service did not start on 127.0.0.1:{self.port}")
            time.sleep(0.01)
        log.info("embedded murphy service on %s (data: %s)", self.endpoint, self.data_dir)
        return self

    def _stop_running_jobs(self) -> None:
        """The process runtime's containers outlive the service; leave none behind."""
        from murphy.jobs.model import TrainingJobStatus
        from murphy.store.base import JobQuery

        service = self._plane.service
        running: list[str] = []
        try:
            for status in (TrainingJobStatus.InProgress, TrainingJobStatus.Stopping):
                jobs, _ = service.list_training_jobs(JobQuery(status_equals=status))
                running += [j["TrainingJobName"] for j in jobs]
        except Exception:  # best effort at exit
            log.exception("could not list jobs while closing the embedded service")
            return
        for name in running:
            with contextlib.suppress(Exception):  # it may have ended meanwhile
                service.stop_training_job(name)
        deadline = time.monotonic() + self.stop_jobs_timeout_s
        while running and time.monotonic() < deadline:
            running = [n for n in running if service.describe_training_job(n)["TrainingJobStatus"] not in _TERMINAL]
            time.sleep(0.1)
        if running:
            log.warning("embedded murphy: jobs still running at exit: %s", ", ".join(running))

    def close(self) -> None:
        if self._plane is not None:
            self._stop_running_jobs()
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(10)
        if self._plane is not None:
            self._plane.close()
        for key, value in self._saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        self._saved_env.clear()
        self._plane = self._server = self._thread = None


_lock = threading.Lock()
_instance: EmbeddedService | None = None
_atexit_registered = False


def ensure_started(data_dir: str | os.PathLike[str] | None = None) -> EmbeddedService:
    """The process's embedded service, started on first use."""
    global _instance, _atexit_registered
    with _lock:
        if _instance is None or not _instance.running:
            _instance = EmbeddedService(data_dir).start()
            if not _atexit_registered:
                atexit.register(shutdown)
                _atexit_registered = True
        return _instance


def current() -> EmbeddedService | None:
    return _instance


def shutdown() -> None:
    """Stop the embedded service (its running jobs first); the next use starts a fresh one."""
    global _instance
    with _lock:
        if _instance is not None:
            _instance.close()
            _instance = None
