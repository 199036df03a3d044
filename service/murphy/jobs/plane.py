"""Assembles the control plane (store + runtime + JobService + Supervisor) from Settings."""

from __future__ import annotations

from dataclasses import dataclass

from murphy.jobs.service import JobService
from murphy.jobs.supervisor import Supervisor
from murphy.runtimes.base import Runtime
from murphy.settings import Settings
from murphy.store import open_job_store
from murphy.store.base import JobStore


def make_runtime(settings: Settings) -> Runtime:
    if settings.runtime == "fake":
        from murphy.runtimes.fake import FakeRuntime

        return FakeRuntime(exit_on_stop=True)
    from murphy.runtimes.catalog import ImageCatalog
    from murphy.runtimes.process import ProcessRuntime

    return ProcessRuntime(
        settings.data_dir / "containers",
        ImageCatalog.load(settings.image_catalog),
        settings.container_store_env(),
    )


@dataclass
class ControlPlane:
    settings: Settings
    store: JobStore
    runtime: Runtime
    service: JobService
    supervisor: Supervisor

    @classmethod
    def from_settings(cls, settings: Settings, *, store: JobStore | None = None, runtime: Runtime | None = None) -> ControlPlane:
        settings.data_dir.mkdir(parents=True, exist_ok=True)
        if settings.object_store == "local":
            settings.resolved_buckets_dir.mkdir(parents=True, exist_ok=True)
        store = store or open_job_store(settings.resolved_database_url)
        runtime = runtime or make_runtime(settings)
        service = JobService(store, runtime, settings)
        supervisor = Supervisor(store, runtime, settings)
        service.on_change = supervisor.wake
        return cls(settings, store, runtime, service, supervisor)

    def start(self) -> None:
        self.supervisor.start()

    def close(self) -> None:
        self.supervisor.close()
        self.store.close()
