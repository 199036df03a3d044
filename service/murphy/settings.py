"""Service settings (``MURPHY_*`` environment variables), built once by the CLI and passed down.

Only the control plane uses this module (it imports pydantic); in-container code reads the
SageMaker file/environment contract instead.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

#: The runtimes with a host cap of their own (``max_instances_<runtime>``).
_CAPPED_RUNTIMES = ("process", "docker", "fake", "kubernetes")


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="MURPHY_", extra="ignore", frozen=True)

    #: Jobs' containers, logs, the SQLite database and (by default) the local S3 buckets.
    data_dir: Path = Field(default_factory=lambda: Path.home() / ".murphy")
    #: SQLAlchemy URL; default ``sqlite:///<data_dir>/murphy.db`` (WAL). PostgreSQL:
    #: ``postgresql+psycopg://user:pw@host/db``.
    database_url: str | None = None
    runtime: Literal["process", "docker", "kubernetes", "fake"] = "process"
    # --- the Docker runtime (murphy.runtimes.docker; docs/runtimes.md) ---
    #: The engine's address; default: ``DOCKER_HOST`` or the local socket.
    docker_host: str | None = None
    #: ``none`` (default): containers have no network; a job whose store is an ``http://`` S3
    #: endpoint reaches it, and only it, through murphy's gateway. ``host``: the host's network
    #: (needed for an ``https://`` endpoint such as AWS itself).
    docker_network: Literal["none", "host"] = "none"
    docker_pids_limit: int = 1024
    #: ``uid:gid`` containers run as; default 1000:1000 (the images' ``murphy`` user) when the
    #: service runs as root, else the service's own uid:gid (so it can read what they write).
    docker_user: str | None = None
    #: Caps every container's memory (MiB) below what its instance type and the host allow.
    docker_max_memory_mib: int | None = None
    # --- the Kubernetes runtime (murphy.runtimes.kubernetes; docs/kubernetes.md) ---
    #: The one namespace every job's objects go in.
    kubernetes_namespace: str = "murphy-jobs"
    #: A kubeconfig file (and a context in it); unset: ``KUBECONFIG``, the in-cluster
    #: ServiceAccount, or ``~/.kube/config``.
    kubernetes_kubeconfig: Path | None = None
    kubernetes_context: str | None = None
    #: A bare API server URL with no authentication (``kubectl proxy``, murphy's fake API
    #: server in tests); takes precedence over the kubeconfig.
    kubernetes_api_server: str | None = None
    #: Instance profiles (node selectors, tolerations, resources by instance type), a JSON file.
    kubernetes_profiles: Path | None = None
    #: Pods reach S3 only through murphy's S3 gateway (docs/security.md): its URL as pods see it.
    #: Default: in a cluster, murphy's own Service (``http://murphy.<namespace>.svc:8081``); outside
    #: one, the loopback listener (pods on this machine: murphy's fake cluster).
    kubernetes_s3_gateway_url: str | None = None
    #: ``host:port`` murphy serves that gateway on. Default: ``0.0.0.0`` and the URL's port (8081)
    #: in a cluster or when the URL is set, else ``127.0.0.1`` on a port kept across restarts.
    kubernetes_s3_gateway_listen: str | None = None
    #: Gone (pods never reach S3 directly): refused with a message naming the gateway's settings.
    kubernetes_s3_endpoint_url: str | None = None
    kubernetes_utility_image: str = "murphy/python:latest"
    kubernetes_image_pull_policy: Literal["IfNotPresent", "Always", "Never"] = "IfNotPresent"
    kubernetes_service_account: str = "murphy-workload"
    #: Labels and names carry it; default: derived from the data directory, like the other runtimes.
    kubernetes_runtime_id: str | None = None
    #: Pods' terminationGracePeriodSeconds: SIGTERM, then SIGKILL after this (SageMaker: 120 s).
    kubernetes_stop_grace_s: int = 120
    #: A pod Pending on an image pull this long, or unschedulable this long, fails the job.
    kubernetes_image_pull_timeout_s: float = 300.0
    kubernetes_scheduling_timeout_s: float = 1800.0
    #: At most one look (GET Job + list pods) per container per this many seconds.
    kubernetes_poll_interval_s: float = 1.0
    #: Where ``s3://`` URIs live: ``local`` = one directory per bucket under ``buckets_dir``;
    #: ``s3`` = a real S3 endpoint (``s3_endpoint_url`` or boto3's own configuration).
    object_store: Literal["local", "s3"] = "local"
    s3_endpoint_url: str | None = None
    buckets_dir: Path | None = None

    #: A rule finding stops the job unless the rule has an ``action_json`` (then its actions
    #: decide). Off = AWS semantics: a finding is reported, only a StopTraining action stops.
    stop_on_finding: bool = True
    #: Seconds between supervisor reconcile passes.
    reconcile_interval_s: float = 0.1
    #: Seconds between SIGTERM and SIGKILL when stopping a container.
    stop_grace_s: float = 10.0
    #: After training ends, how long rule evaluators get to consume the remaining steps before
    #: they are stopped and the job finishes anyway.
    rule_finish_timeout_s: float = 120.0
    #: Poll interval handed to rule evaluators (seconds).
    rule_poll_interval_s: float = 0.1
    #: While a rule container runs, how often its result.json is read (it is written just
    #: before the container exits, and an exit is noticed on every pass; this catches a
    #: container that lingers after writing it without a GET per rule per pass on S3).
    rule_result_poll_s: float = 1.0
    #: Seconds between sweeps of the reconciler, which stops containers carrying this
    #: installation's labels that no live job accounts for (it also sweeps at service start).
    reconciler_interval_s: float = 30.0
    #: TEST ONLY (fault injection, ``MURPHY_TEST_CRASH_AFTER_LAUNCH=1``): the service kills itself
    #: with SIGKILL right after launching a job's containers, before their handles are recorded,
    #: so tests can show what the reconciler does with the result. Never set it otherwise.
    test_crash_after_launch: bool = False
    #: The most training hosts (``ResourceConfig.InstanceCount``) one job may ask of each runtime:
    #: every host is a container (a process tree) on this machine, so a laptop must not start 64.
    #: ``MURPHY_MAX_INSTANCES_PROCESS`` / ``_DOCKER`` / ``_FAKE``; a request above is a ValidationException.
    #: On Kubernetes the hosts are pods the cluster schedules: ``_KUBERNETES`` is a per-job quota.
    max_instances_process: int = Field(default=4, ge=1)
    max_instances_docker: int = Field(default=8, ge=1)
    max_instances_fake: int = Field(default=8, ge=1)
    max_instances_kubernetes: int = Field(default=64, ge=1)
    #: A JSON file extending/overriding the built-in image catalog.
    image_catalog: Path | None = None

    default_account: str = "123456789012"
    default_region: str = "us-east-1"
    host: str = "127.0.0.1"
    port: int = 8080
    max_body_bytes: int = 1_048_576
    #: A client that stops sending its body mid-way gets a 408 after this long (seconds).
    body_read_timeout_s: float = 30.0
    #: A connection whose request headers are not complete this long after it opened (or after
    #: its previous response) gets a 408 and is closed (slow loris; ``murphy server`` only).
    header_timeout_s: float = 10.0
    #: Request headers beyond this many bytes (names + values) or ``max_headers`` fields get a 431.
    max_header_bytes: int = 16384
    max_headers: int = 128

    # --- authentication (murphy.auth; docs/security.md) ---
    #: ``sigv4``: every request must be signed with a murphy access key (``murphy keys create``).
    #: ``none``: nobody is checked; only allowed on a loopback ``host``.
    auth: Literal["none", "sigv4"] = "none"
    #: How far a request's X-Amz-Date may be from the server's clock (AWS: 5 minutes).
    auth_clock_skew_s: float = 300.0
    #: How long a verified key is remembered: disabling or deleting one takes up to this long.
    auth_key_cache_s: float = 5.0
    #: Paths answered without a signature (probes). Add ``/metrics`` for an unsigned scraper.
    auth_public_paths: tuple[str, ...] = ("/healthz",)
    #: How long a dashboard login (``/ui/login``) lasts before the browser must log in again.
    ui_session_s: float = 12 * 3600.0

    # --- events (murphy.events) ---
    #: Connect and read timeout of one webhook/EventBridge delivery attempt (seconds).
    event_delivery_timeout_s: float = 5.0
    #: Retries: exponential backoff with full jitter, ``uniform(0, min(cap, base * 2**n))``.
    event_retry_base_s: float = 0.2
    event_retry_cap_s: float = 30.0
    #: Attempts per event and subscription before it goes to the dead-letter list.
    event_max_attempts: int = 8
    #: How often dispatchers look at the outbox without a wake-up (events written by another
    #: process on the same database; in-process writes wake them at once).
    event_poll_interval_s: float = 0.5
    #: Webhook/EventBridge targets allowed whatever the policy (murphy.events.targets): host
    #: names, addresses or networks (``hooks.internal``, ``10.1.2.3``, ``169.254.0.0/16``).
    event_target_allowlist: tuple[str, ...] = ()
    #: Fernet key that seals webhook secrets in the job store (murphy.events.sealing); unset:
    #: ``<data_dir>/secret.key``, created on first use. Processes sharing a database share it.
    secret_key: SecretStr | None = None
    #: How often the bus re-reads the subscription list, to start delivering for subscriptions
    #: another process created on the same database and to stop those it deleted.
    event_subscription_sync_s: float = 2.0
    #: Outbox retention: older events are deleted (the newest is always kept; 0: keep all).
    #: A subscription that falls further behind than this misses the deleted events.
    event_retention_s: float = 7 * 86400.0
    #: Dead letters that failed longer ago than this are deleted (0: keep all). Letters queued
    #: for redrive are kept until delivered.
    dead_letter_retention_s: float = 14 * 86400.0
    #: How often retention is applied.
    event_prune_interval_s: float = 3600.0

    def _capped(self, runtime: str | None) -> str:
        # The runtime whose cap applies: its own, else the process runtime's.
        name = runtime or self.runtime
        return name if name in _CAPPED_RUNTIMES else "process"

    def max_instances(self, runtime: str | None = None) -> int:
        """The host cap of ``runtime`` (default: the configured one)."""
        return int(getattr(self, f"max_instances_{self._capped(runtime)}"))

    def max_instances_variable(self, runtime: str | None = None) -> str:
        """The environment variable that sets :meth:`max_instances` of ``runtime``."""
        return f"MURPHY_MAX_INSTANCES_{self._capped(runtime).upper()}"

    @property
    def resolved_database_url(self) -> str:
        return self.database_url or f"sqlite:///{self.data_dir / 'murphy.db'}"

    @property
    def resolved_buckets_dir(self) -> Path:
        return self.buckets_dir or self.data_dir / "buckets"

    def container_store_env(self) -> dict[str, str]:
        """Environment that makes ``s3://`` resolve in a container the way it does here."""
        if self.object_store == "local":
            return {"MURPHY_S3_LOCAL_ROOT": str(self.resolved_buckets_dir)}
        return {"MURPHY_S3_ENDPOINT_URL": self.s3_endpoint_url} if self.s3_endpoint_url else {}
