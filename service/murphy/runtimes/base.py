"""The runtime boundary: where a job's containers run.

The supervisor turns a job into *plans* (:class:`TrainingPlan`, :class:`RulePlan`: what to run,
with which configuration, reading and writing which ``s3://`` locations) and hands them to a
:class:`Runtime`. The runtime decides how: a local process with its own ``/opt/ml`` directory
(:mod:`murphy.runtimes.process`, the embedded default), a Docker container, a Kubernetes pod, or
nothing at all (:class:`murphy.runtimes.fake.FakeRuntime`, for unit tests).

Runtimes keep no state of their own: everything needed to find a container again is in the
:class:`Handle` that ``launch`` returns, which the supervisor stores on the job
record. ``launch`` is idempotent on ``plan.container_name``: launching a name that already
exists returns the existing container's handle instead of starting a second one.

Every container also carries murphy's labels (this installation's runtime id, the job, the role,
the container name) where its backend keeps them: engine labels (Docker), pod labels
(Kubernetes), environment markers readable in ``/proc`` (processes). ``list_containers`` asks
the backend for them, not any record, so the supervisor's reconciler finds what a crash left
between a launch and the write of its handle (docs/runtimes.md, "The stop guarantee").
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable


@dataclass
class Handle:
    """Where a runtime put one container: enough to find it again after a service restart."""

    runtime: str
    id: str
    data: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Channel:
    """One ``InputDataConfig`` channel: downloaded to ``/opt/ml/input/data/<name>`` (File,
    FastFile) or streamed through the FIFOs ``/opt/ml/input/data/<name>_<epoch>`` (Pipe)."""

    name: str
    uri: str  # s3://... (or file://) prefix or object
    content_type: str | None = None
    data_type: str = "S3Prefix"  # S3Prefix | ManifestFile | AugmentedManifestFile
    distribution: str = "FullyReplicated"
    input_mode: str = "File"  # the channel's InputMode, else the job's TrainingInputMode
    record_wrapper: str = "None"  # RecordWrapperType: None | RecordIO (Pipe mode only)
    compression: str = "None"  # CompressionType: None | Gzip (Pipe mode only)
    shuffle_seed: int | None = None  # ShuffleConfig.Seed (Pipe mode: a new order every epoch)


@dataclass(frozen=True)
class TrainingPlan:
    """Everything one training container needs (SageMaker's container contract)."""

    container_name: str  # unique per runtime, e.g. "<job>-training"
    job_name: str
    image: str
    hyperparameters: dict[str, str]
    environment: dict[str, str]
    instance_type: str
    instance_count: int
    channels: tuple[Channel, ...] = ()
    #: The DebugHookConfig request object (written as ``debughookconfig.json``), or None.
    debug_hook_config: dict[str, object] | None = None
    #: Where the tensors the hook writes locally are mirrored while the job runs
    #: (``<DebugHookConfig.S3OutputPath>/<job>/debug-output``), or None without a hook config.
    tensor_uri: str | None = None
    #: ``<OutputDataConfig.S3OutputPath>/<job>/output`` (model.tar.gz and output.tar.gz go here).
    output_uri: str = ""
    container_entrypoint: tuple[str, ...] | None = None
    container_arguments: tuple[str, ...] | None = None
    max_runtime_s: int | None = None
    #: The job's account and region (container labels; the Docker runtime finds containers by them).
    account: str = ""
    region: str = ""
    role: Literal["training"] = "training"
    #: The TensorBoardOutputConfig request object (written as ``tensorboardoutputconfig.json``),
    #: and where its LocalPath is mirrored while the job runs
    #: (``<S3OutputPath>/<job>/tensorboard-output``); None without one.
    tensorboard_config: dict[str, object] | None = None
    tensorboard_uri: str | None = None
    #: This container's host in the job's cluster (``InstanceCount`` hosts ``algo-1`` ..
    #: ``algo-N``, one container each; docs/runtimes.md, "Multi-instance jobs").
    current_host: str = "algo-1"
    hosts: tuple[str, ...] = ("algo-1",)
    #: The container name of ``algo-1`` (hosts of one job find each other through it).
    first_host_container: str = ""

    #: ``CheckpointConfig.S3Uri``: the job may read and write there (its S3 grants).
    checkpoint_uri: str | None = None

    @property
    def host_index(self) -> int:
        """1 for ``algo-1`` (the master), ..."""
        return self.hosts.index(self.current_host) + 1


@dataclass(frozen=True)
class RulePlan:
    """One rule-evaluation container (``murphy rule-eval``, see ``rule_containers/README.md``)."""

    container_name: str  # unique per runtime, e.g. "<job>-rule-<i>"
    job_name: str
    rule_name: str  # RuleConfigurationName
    image: str  # RuleEvaluatorImage
    rule_parameters: dict[str, str]
    base_trial_uri: str  # the job's debug-output
    result_uri: str  # where result.json / heartbeat.json go
    environment: dict[str, str] = field(default_factory=dict)
    instance_type: str | None = None
    account: str = ""
    region: str = ""
    role: Literal["rule"] = "rule"


Plan = TrainingPlan | RulePlan


@dataclass(frozen=True)
class ContainerState:
    """What a runtime observed about one container."""

    phase: Literal["pending", "running", "exited", "missing"]
    exit_code: int | None = None
    #: For training: the contents of ``/opt/ml/output/failure`` if the script wrote it; for an
    #: OOM kill or a vanished container: what happened. None when nothing is known.
    failure: str | None = None
    #: The last lines of the container's log (for a FailureReason when there is no failure file).
    log_tail: str = ""
    started_at: float | None = None
    ended_at: float | None = None
    #: Training containers report progress through the SageMaker phases they pass
    #: ("Downloading", "Training", "Uploading") so the job's SecondaryStatus can follow.
    stage: str | None = None


@dataclass(frozen=True)
class LogEvent:
    timestamp_ms: int
    message: str
    ingestion_ms: int


@dataclass(frozen=True)
class LogPage:
    events: list[LogEvent]
    #: Cursor to pass back for the next page; equal to the one given when nothing was new.
    next_cursor: int


@dataclass(frozen=True)
class FoundContainer:
    """A container a runtime found by its labels (see :meth:`Runtime.list_containers`)."""

    #: Accepted by ``status``, ``stop`` and ``remove`` like the handle ``launch`` returned.
    handle: Handle
    job_name: str
    container_name: str
    role: Literal["training", "rule"]
    #: ``pending`` (created, not started), ``running``, or ``exited`` (still known to the backend).
    phase: Literal["pending", "running", "exited"]

    @property
    def live(self) -> bool:
        return self.phase != "exited"


def runtime_id(root_dir: str) -> str:
    """A short id of one murphy installation (its container directory): labels and names carry
    it, so two services on one engine, host or cluster never touch each other's containers."""
    return hashlib.sha1(os.path.abspath(root_dir).encode()).hexdigest()[:8]


@runtime_checkable
class Runtime(Protocol):
    name: str

    def launch(self, plan: Plan) -> Handle:
        """Start the container (idempotent on ``plan.container_name``)."""
        ...

    def status(self, handle: Handle) -> ContainerState: ...

    def stop(self, handle: Handle, *, force: bool = False) -> None:
        """Ask the container to stop (SIGTERM); ``force`` kills it (SIGKILL). Never raises for a
        container that already exited or vanished."""
        ...

    def read_logs(self, handle: Handle, cursor: int = 0, limit: int = 10_000) -> LogPage:
        """Log lines (stdout and stderr, in order) from ``cursor`` on."""
        ...

    def remove(self, handle: Handle) -> None:
        """Forget the container's resources except its logs (after the job is terminal)."""
        ...

    def list_containers(self, job_name: str | None = None) -> list[FoundContainer]:
        """The containers of this runtime id (of one job, when ``job_name`` is given) that the
        backend still has, asked of the backend itself (engine, OS, API server) by murphy's
        labels. Every live one is listed (pending or running); exited ones may be, where the
        backend keeps them until ``remove``."""
        ...


@dataclass(frozen=True)
class ScopedCredentials:
    """S3 credentials murphy issued for one container (docs/security.md, "Jobs hold only their
    own keys"): they work only through murphy's S3 gateway, only on the container's own
    locations, and only until the runtime revokes them when the container is removed."""

    access_key_id: str
    #: ``AWS_ACCESS_KEY_ID`` / ``AWS_SECRET_ACCESS_KEY`` / ``AWS_SESSION_TOKEN`` and, when an
    #: endpoint was given, ``MURPHY_S3_ENDPOINT_URL`` / ``AWS_ENDPOINT_URL_S3`` pointing at it.
    env: dict[str, str]


#: Variables of the service's environment that would give a container the service's own S3
#: identity; a runtime with :class:`JobCredentials` never passes them on.
SERVICE_CREDENTIAL_VARS = (
    "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN", "AWS_PROFILE",
    "AWS_DEFAULT_PROFILE", "AWS_SHARED_CREDENTIALS_FILE", "AWS_CONFIG_FILE", "AWS_ROLE_ARN",
    "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_CREDENTIALS_FULL_URI",
    "AWS_CONTAINER_AUTHORIZATION_TOKEN", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "MURPHY_S3_ENDPOINT_URL",
)


def with_identity(env: Mapping[str, str], identity: Mapping[str, str]) -> dict[str, str]:
    """``env`` without any of :data:`SERVICE_CREDENTIAL_VARS`, then ``identity`` (the
    container's own credentials and endpoint): applied last, so that a job's ``Environment``
    cannot name another key, profile or endpoint and point its container around the gateway."""
    out = {k: v for k, v in env.items() if k not in SERVICE_CREDENTIAL_VARS}
    out.update(identity)
    return out


def scoped_environment(env: dict[str, str], creds: ScopedCredentials) -> dict[str, str]:
    """``env`` without the service's identity, with the container's own credentials instead."""
    return with_identity(env, creds.env)


@runtime_checkable
class JobCredentials(Protocol):
    """Per-container S3 credentials and the gateway that enforces them
    (:class:`murphy.auth.s3gateway.S3Gateway`); a runtime holds one when the object store is
    an S3 endpoint."""

    def issue(self, plan: Plan, endpoint_url: str | None) -> ScopedCredentials:
        """New credentials for ``plan``'s container, valid on its own locations only; its
        environment points at ``endpoint_url`` (the gateway as the container reaches it)."""
        ...

    def revoke(self, access_key_id: str) -> None:
        """The credentials stop working (the container was removed). Idempotent."""
        ...

    def listen_unix(self, socket_path: str) -> None:
        """Serve the gateway on a Unix socket (the Docker runtime's, bind-mounted into containers)."""
        ...

    def listen_tcp(self, host: str = "127.0.0.1", port: int = 0) -> str:
        """Serve the gateway on ``host:port`` (0: any free port); returns its ``http://`` URL."""
        ...

    def close(self) -> None: ...
