"""Assembles the control plane (store + runtime + JobService + Supervisor + EventBus) from
Settings."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import cast

from murphy.container import manifest
from murphy.events.bus import EventBus
from murphy.jobs.events import events_for
from murphy.jobs.service import JobService
from murphy.jobs.supervisor import Supervisor
from murphy.runtimes.base import JobCredentials, Runtime
from murphy.settings import Settings
from murphy.store import open_job_store
from murphy.store.base import AccessKeyStore, JobStore

log = logging.getLogger(__name__)


def _manifest_prefixes(settings: Settings) -> Callable[[str], list[str]]:
    """The prefix a ``ManifestFile`` channel's manifest names (its job may read there)."""
    from murphy.jobs.plans import open_uri

    def read(uri: str) -> list[str]:
        parent, _, name = uri.rpartition("/")
        try:
            return [manifest.parse(open_uri(settings, parent).get(name), uri).prefix]
        except Exception as e:  # unreadable, or not a manifest: the job's own download then fails with the reason
            log.warning("cannot read the manifest %s for the job's S3 grants: %s", uri, e)
            return []

    return read


def _upstream(settings: Settings) -> tuple[str, str | None]:
    """Where the S3 gateway forwards, and the region it signs for there (None: the client's).
    No --s3-endpoint-url: AWS's own S3 of the region, behind the gateway too, so that no
    container ever holds the service's keys."""
    from murphy.storage.s3 import service_endpoint

    return service_endpoint(settings.s3_endpoint_url)


def job_credentials(settings: Settings, store: JobStore) -> JobCredentials | None:
    """The S3 gateway that gives each container only its own keys (docs/security.md), or None
    where containers reach no S3 endpoint (local buckets)."""
    if settings.object_store == "local" or settings.runtime == "fake":
        return None
    from murphy.auth.keys import KeyRing
    from murphy.auth.s3gateway import S3Gateway

    upstream, region = _upstream(settings)
    return S3Gateway(KeyRing(cast(AccessKeyStore, store), settings), upstream, upstream_region=region,
                     default_account=settings.default_account, skew_s=settings.auth_clock_skew_s,
                     cache_s=settings.auth_key_cache_s, manifest_prefixes=_manifest_prefixes(settings))


def make_runtime(settings: Settings, store: JobStore | None = None) -> Runtime:
    if settings.runtime == "fake":
        from murphy.runtimes.fake import FakeRuntime

        return FakeRuntime(exit_on_stop=True)
    from murphy.runtimes.catalog import ImageCatalog

    credentials = job_credentials(settings, store) if store is not None else None
    if settings.runtime == "docker":
        from murphy.runtimes.docker import DockerRuntime, default_user
        from murphy.runtimes.docker_spec import DockerOptions, StoreAccess

        local = settings.object_store == "local"
        # With the gateway, its upstream (AWS's regional endpoint where none is configured).
        endpoint = _upstream(settings)[0] if credentials is not None else settings.s3_endpoint_url
        access = StoreAccess(buckets_dir=str(settings.resolved_buckets_dir) if local else None,
                            endpoint_url=None if local else endpoint)
        options = DockerOptions(network=settings.docker_network, pids_limit=settings.docker_pids_limit,
                                user=settings.docker_user or default_user(),
                                max_memory_bytes=(settings.docker_max_memory_mib or 0) << 20 or None)
        return DockerRuntime(settings.data_dir / "containers", ImageCatalog.load(settings.image_catalog), access,
                             options=options, docker_host=settings.docker_host, credentials=credentials)
    if settings.runtime == "kubernetes":
        return kubernetes_runtime(settings, credentials)
    from murphy.runtimes.process import ProcessRuntime

    return ProcessRuntime(
        settings.data_dir / "containers",
        ImageCatalog.load(settings.image_catalog),
        settings.container_store_env(),
        credentials=credentials,
    )


def kubernetes_runtime(settings: Settings, credentials: JobCredentials | None) -> Runtime:
    """The Kubernetes runtime as ``settings`` configure it (docs/kubernetes.md): its pods hold
    only the keys ``credentials`` (the S3 gateway) issues and reach S3 only through it."""
    from murphy.exceptions import RuntimeBackendError
    from murphy.runtimes.base import runtime_id
    from murphy.runtimes.catalog import ImageCatalog
    from murphy.runtimes.kubernetes import KubernetesRuntime
    from murphy.runtimes.kubernetes_gateway import serve
    from murphy.runtimes.kubernetes_lightkube import LightkubeApi, load_config
    from murphy.runtimes.kubernetes_objects import KubernetesOptions
    from murphy.runtimes.kubernetes_resources import load_profiles
    from murphy.runtimes.kubernetes_status import Limits

    if settings.object_store != "s3":
        raise RuntimeBackendError("--runtime kubernetes needs S3: --object-store s3 (--s3-endpoint-url URL, or AWS's "
                                  "S3 of the region; pods reach it through murphy's S3 gateway, "
                                  "MURPHY_KUBERNETES_S3_GATEWAY_URL); local buckets are not visible from a cluster")
    if settings.kubernetes_s3_endpoint_url:
        raise RuntimeBackendError("MURPHY_KUBERNETES_S3_ENDPOINT_URL is gone: pods reach S3 only through murphy's S3 "
                                  "gateway, with keys issued per job; set MURPHY_KUBERNETES_S3_GATEWAY_URL "
                                  "(--pods-s3-gateway-url) to the gateway as pods reach it (docs/kubernetes.md)")
    if credentials is None:
        raise RuntimeBackendError("--runtime kubernetes needs the job store (it issues each job's S3 keys)")
    root = settings.data_dir / "containers"
    limits = Limits(image_pull_s=settings.kubernetes_image_pull_timeout_s,
                    scheduling_s=settings.kubernetes_scheduling_timeout_s)
    try:
        endpoint = serve(credentials, root, settings.kubernetes_s3_gateway_url, settings.kubernetes_s3_gateway_listen)
        options = KubernetesOptions(
            namespace=settings.kubernetes_namespace, runtime_id=settings.kubernetes_runtime_id or runtime_id(str(root)),
            s3_endpoint_url=endpoint, service_account=settings.kubernetes_service_account,
            utility_image=settings.kubernetes_utility_image, image_pull_policy=settings.kubernetes_image_pull_policy,
            profiles=tuple(load_profiles(settings.kubernetes_profiles)) if settings.kubernetes_profiles else (),
            catalog=ImageCatalog.load(settings.image_catalog), stop_grace_s=settings.kubernetes_stop_grace_s,
            rule_grace_s=int(settings.rule_finish_timeout_s))
        config = load_config(str(settings.kubernetes_kubeconfig) if settings.kubernetes_kubeconfig else None,
                             settings.kubernetes_context, settings.kubernetes_api_server)
        return KubernetesRuntime(root, LightkubeApi(options.namespace, config), options, credentials=credentials,
                                 limits=limits, poll_interval_s=settings.kubernetes_poll_interval_s)
    except BaseException:  # the gateway's listener goes with the runtime that was not made
        credentials.close()
        raise

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
        runtime = runtime or make_runtime(settings, store)
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
        if callable(close):  # the runtime's S3 gateway
            close()
