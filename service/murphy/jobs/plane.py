"""Assembles the control plane (store + runtime + JobService + Supervisor + EventBus) from
Settings."""

from __future__ import annotations

from dataclasses import dataclass

from murphy.events.bus import EventBus
from murphy.jobs.events import events_for
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

    if settings.runtime == "docker":
        from murphy.runtimes.docker import DockerRuntime, default_user
        from murphy.runtimes.docker_spec import DockerOptions, StoreAccess

        local = settings.object_store == "local"
        store = StoreAccess(buckets_dir=str(settings.resolved_buckets_dir) if local else None,
                            endpoint_url=None if local else settings.s3_endpoint_url)
        options = DockerOptions(network=settings.docker_network, pids_limit=settings.docker_pids_limit,
                                user=settings.docker_user or default_user(),
                                max_memory_bytes=(settings.docker_max_memory_mib or 0) << 20 or None)
        return DockerRuntime(settings.data_dir / "containers", ImageCatalog.load(settings.image_catalog), store,
                             options=options, docker_host=settings.docker_host)
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
    bus: EventBus

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
        bus = EventBus(store, settings)
        # Every status change (service or supervisor) appends its event in the same transaction
        # and, once committed, wakes the dispatchers: no polling delay, no lost event on a crash.
        store.set_event_builder(events_for, on_appended=lambda _seq: bus.wake())
        return cls(settings, store, runtime, service, supervisor, bus)

    def start(self) -> None:
        self.bus.start()
        self.supervisor.start()

    def close(self) -> None:
        self.supervisor.close()
        self.bus.close()
        self.store.close()
        close = getattr(self.runtime, "close", None)
        if callable(close):  # the Docker runtime's S3 gateway
            close()
