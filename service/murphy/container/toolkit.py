"""``python -m murphy.container``: what runs inside a training container, like SageMaker's toolkit.

Stages (reported in the stage file, see :meth:`OptMl.stage_file`): ``Downloading`` (channels,
script-mode source), ``Training`` (the program runs; the tensor mirror uploads the hook's local
directory), ``Uploading`` (final mirror pass, ``training_job_end.ts``, ``model.tar.gz`` and
``output.tar.gz``). Exit code: the program's (128 + N when a signal ended it); 1 with
``/opt/ml/output/failure`` written when the toolkit itself could not do its part.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from types import FrameType
from typing import Any

from murphy.container import distributed, hostenv
from murphy.container.env import (
    END_MARKER,
    MURPHY_CONFIG,
    OPT_ML_ENV,
    PROGRAM_HP,
    SUBMIT_DIR_HP,
    OptMl,
    argv_for,
    decode_hyperparameters,
    read_json,
    split_hyperparameters,
    to_cmd_args,
    write_json_atomic,
)
from murphy.container.inputs import (
    PIPE,
    SHARDED,
    HostShard,
    InputError,
    Interrupted,
    download_channel,
    fetch_source,
    pack_dir,
    pipe_source,
)
from murphy.container.mirror import MirrorThread, TensorMirror
from murphy.container.namespace import SAGEMAKER_OPT_ML, wrap, write_python_shims
from murphy.container.pipes import PipeFeeder, PipeSource, start_feeders
from murphy.container.smdebug_alias import program_env
from murphy.storage import gateway, open_store

_FORWARDED = (signal.SIGTERM, signal.SIGINT)


def log(message: str) -> None:
    print(f"murphy-toolkit INFO {message}", flush=True)


class ToolkitError(Exception):
    """The toolkit cannot do its part (becomes ``/opt/ml/output/failure``)."""


class Toolkit:
    def __init__(self, opt_ml: OptMl, mirror_interval: float = 0.1) -> None:
        self.opt_ml = opt_ml
        self.mirror_interval = mirror_interval
        self.signum: int | None = None
        self.program: subprocess.Popen[bytes] | None = None
        self.config: dict[str, Any] = {}
        #: ``resourceconfig.json``, read once per run for everything that needs the host.
        self.resource_config: dict[str, Any] = {}
        #: Variables the program gets on top of the toolkit's own.
        self.program_env: dict[str, str] = {}
        #: Pipe-mode channels: what their FIFOs carry, the threads feeding them, the first failure.
        self.pipes: list[PipeSource] = []
        self.feeders: list[PipeFeeder] = []
        self.pipe_error: str | None = None

    # ---- signals ---------------------------------------------------------------------------

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self.signum = signum
        self._forward(signum)

    def _forward(self, signum: int) -> None:
        # The program has its own process group so that a stop sent to the container's group
        # reaches it exactly once: from here.
        if self.program is not None and self.program.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.program.pid, signum)

    # ---- steps -----------------------------------------------------------------------------

    def stage(self, name: str) -> None:
        try:
            write_json_atomic(self.opt_ml.stage_file(), {"stage": name, "at": time.time()})
        except OSError as e:
            log(f"cannot write the stage file: {e}")

    def download(self) -> None:
        channels = self.config.get("channels", [])
        # Only a sharded channel needs to know the host (a one-host contract stays optional).
        host = current_host(self.resource_config) if any(c.get("distribution") == SHARDED for c in channels) else None
        for channel in channels:
            if channel.get("input_mode") == PIPE:  # streamed once the program starts, not downloaded
                source = pipe_source(channel, host)
                self.pipes.append(source)
                log(f"channel {channel['name']}: Pipe input mode, {len(source.epoch_keys(0))} object(s) from {channel['uri']} "
                    f"-> {os.path.join(self.opt_ml.data_dir, channel['name'])}_<epoch>")
                continue
            dest = self.opt_ml.channel_dir(channel["name"])
            n = download_channel(channel, dest, lambda: self.signum is not None, host)
            sharded = host is not None and len(host.hosts) > 1 and channel.get("distribution") == SHARDED
            share = f" ({host.describe()})" if sharded and host is not None else ""
            log(f"channel {channel['name']}: {n} object(s){share} from {channel['uri']} -> {dest}")

    def argv(self) -> tuple[list[str], str]:
        """The program's argv and working directory."""
        python = str(self.config.get("python") or sys.executable)
        raw = read_json(self.opt_ml.config_file("hyperparameters.json"), {})
        user, platform = split_hyperparameters(decode_hyperparameters(raw))
        entrypoint, arguments = self.config.get("container_entrypoint"), self.config.get("container_arguments")
        code = self.opt_ml.code_dir
        if entrypoint:
            return self._entrypoint([*entrypoint, *(arguments or [])], python), code
        args = list(arguments) if arguments is not None else to_cmd_args(user)
        if self.config.get("kind", "script-mode") == "command":
            command = list(self.config.get("command") or [])
            if not command:
                raise ToolkitError("murphy.json: a command image needs a non-empty 'command'")
            return [*command, *args], code
        return self._script_mode(platform, args, python), code

    def _entrypoint(self, argv: list[str], python: str) -> list[str]:
        """A container entrypoint runs with ``python3``/``pip3`` on ``PATH`` meaning the runtime's
        interpreter, as in an image (on the process runtime; :meth:`launch` gives it /opt/ml)."""
        if os.path.realpath(self.opt_ml.root) == SAGEMAKER_OPT_ML:
            return argv
        shims = write_python_shims(os.path.join(os.path.dirname(self.opt_ml.root), "murphy-bin"), python)
        self.program_env["PATH"] = os.pathsep.join(p for p in (shims, os.environ.get("PATH", "")) if p)
        return argv

    def launch(self, argv: list[str]) -> list[str]:
        """How the program is exec'd. In a container ``/opt/ml`` is the job's: as it is. On the
        process runtime every program (script mode, a command image, an entrypoint) starts
        through :mod:`murphy.container.namespace`, which gives it a private mount namespace with
        the job's directory at ``/opt/ml``, or (where none can be made, or MURPHY_MOUNT_NAMESPACE
        is off) runs it with ``MURPHY_OPT_ML`` naming that directory for the hook to map into."""
        if os.path.realpath(self.opt_ml.root) == SAGEMAKER_OPT_ML:
            return argv
        log(f"/opt/ml is {self.opt_ml.root} in the program's own mount namespace")
        return wrap(argv, self.opt_ml.root, str(self.config.get("python") or sys.executable))

    def _script_mode(self, platform: Mapping[str, Any], args: list[str], python: str) -> list[str]:
        program = platform.get(PROGRAM_HP)
        if not isinstance(program, str) or not program:
            raise ToolkitError("script mode needs the sagemaker_program hyperparameter (the entry point)")
        code = self.opt_ml.code_dir
        submit = platform.get(SUBMIT_DIR_HP)
        if isinstance(submit, str) and submit:
            fetch_source(submit, code)
            log(f"source {submit} -> {code}")
        if not os.path.isfile(os.path.join(code, program)):
            raise ToolkitError(f"sagemaker_program {program!r} is not in the source directory ({submit or code})")
        if os.path.exists(os.path.join(code, "requirements.txt")):
            log("requirements.txt found: the process runtime does not install packages; "
                "install them into the service's environment")
        try:  # torch_distributed: torchrun across the job's hosts (murphy.container.distributed)
            return distributed.launch_argv(argv_for(program, args, code, python), program, platform, self.config, python)
        except distributed.DistributedError as e:
            raise ToolkitError(str(e)) from e

    def run_program(self, argv: list[str], cwd: str) -> int:
        log(f"invoking {argv!r} in {cwd}")
        try:
            self.program = _spawn_group_leader(argv, cwd, {**os.environ, **self.program_env})
        except OSError as e:
            raise ToolkitError(f"cannot start {argv[0]!r}: {e}") from e
        if self.signum is not None:  # arrived between the check and the spawn
            self._forward(self.signum)
        elif self.pipe_error is not None:
            self._forward(signal.SIGTERM)
        rc = self.program.wait()
        return 128 - rc if rc < 0 else rc

    def _on_pipe_error(self, message: str) -> None:
        """A feeder cannot stream its channel (feeder thread): the job fails with its reason,
        and the program, which would read a short or endless pipe, is stopped."""
        if self.pipe_error is None:
            self.pipe_error = message
            log(f"error: {message}; stopping the program")
            self._forward(signal.SIGTERM)

    def _start_pipes(self) -> None:
        if self.pipes:
            self.feeders = start_feeders(self.pipes, self.opt_ml.data_dir, self._on_pipe_error)

    def _stop_pipes(self) -> None:
        for feeder in self.feeders:
            feeder.stop()
            log(f"channel {feeder.source.channel}: {feeder.epochs_done} epoch(s) streamed")
        self.feeders = []

    def _mirror(self) -> TensorMirror | None:
        uri = self.config.get("tensor_uri")
        if not uri:
            return None
        hook_cfg = read_json(self.opt_ml.config_file("debughookconfig.json"), {}) or {}
        local = hook_cfg.get("LocalPath") or self.config.get("local_path") or self.opt_ml.tensors_dir
        os.makedirs(local, exist_ok=True)
        return TensorMirror(local, open_store(uri))

    def _tensorboard_thread(self) -> MirrorThread | None:
        """TensorBoardOutputConfig: LocalPath goes to S3OutputPath while the job runs, as on SageMaker."""
        uri, local = self.config.get("tensorboard_uri"), self.config.get("tensorboard_path")
        if not uri or not local:
            return None
        os.makedirs(local, exist_ok=True)
        thread = MirrorThread(TensorMirror(local, open_store(uri), gated=False), max(self.mirror_interval, 1.0))
        thread.start()
        return thread

    def _final_tensorboard_pass(self, mirror: TensorMirror) -> None:
        try:
            n = mirror.run_pass(final=True)
            log(f"tensorboard: {len(mirror.uploaded)} file(s) at {self.config.get('tensorboard_uri')} ({n} in the final pass)")
        except Exception as e:  # TensorBoard files are a convenience: the job's outcome stands
            log(f"cannot upload TensorBoard files to {self.config.get('tensorboard_uri')}: {type(e).__name__}: {e}")

    def this_host(self) -> None:
        """Which host this container is, and its own ``SM_*`` values for the program (one pod
        template for every host on Kubernetes: :mod:`murphy.container.hostenv`)."""
        cluster = self.config.get("cluster")
        cluster = cluster if isinstance(cluster, dict) else None
        rc = self.resource_config
        try:
            host = hostenv.current_host(cluster, rc, os.environ)
        except hostenv.HostError as e:
            raise ToolkitError(str(e)) from e
        if host is None:
            return
        changed = hostenv.host_environment(os.environ, host, rc)
        if changed:
            log(f"this host is {host}: {', '.join(sorted(changed))} set for it")
            self.program_env.update(changed)
        self._alias_hosts(cluster, host)

    def _alias_hosts(self, cluster: dict[str, Any] | None, host: str) -> None:
        # Kubernetes: algo-<k> resolves for the program through HOSTALIASES (hostenv.host_aliases);
        # a user's own HOSTALIASES is kept. Not being able to write it costs only the names.
        aliases = hostenv.host_aliases(cluster, host, socket.getfqdn()) if "HOSTALIASES" not in os.environ else None
        if not aliases:
            return
        path = os.path.join(tempfile.gettempdir(), "murphy-hostaliases")
        try:
            with open(path, "w", encoding="utf-8") as f:
                f.write(aliases)
        except OSError as e:
            log(f"cannot write {path} ({e}): the job's host names will not resolve by name here")
            return
        self.program_env["HOSTALIASES"] = path
        log(f"host names resolve through {path} (HOSTALIASES): {aliases.strip().replace(chr(10), '; ')}")

    # ---- the whole run ---------------------------------------------------------------------

    def run(self) -> int:
        for sig in _FORWARDED:
            signal.signal(sig, self._on_signal)
        self.config = read_json(os.path.join(self.opt_ml.config_dir, MURPHY_CONFIG), {}) or {}
        mirror: TensorMirror | None = None
        thread: MirrorThread | None = None
        tb_thread: MirrorThread | None = None
        code = 1
        ran = False
        try:
            # Inside the try: an unreadable resourceconfig.json fails the job with its reason.
            self.resource_config = read_resource_config(self.opt_ml)
            self.this_host()
            mirror = self._mirror()
            self.stage("Downloading")
            self.download()
            argv, cwd = self.argv()
            argv = self.launch(argv)
            if self.signum is not None:
                raise Interrupted
            if mirror is not None:
                thread = MirrorThread(mirror, self.mirror_interval)
                thread.start()
            tb_thread = self._tensorboard_thread()
            self._start_pipes()
            self.stage("Training")
            ran = True
            code = self.run_program(argv, cwd)
            log(f"program exited with code {code}")
            self._stop_pipes()
            if self.pipe_error is not None:
                code = self._fail(self.pipe_error, code)
        except Interrupted:
            code = 128 + (self.signum or signal.SIGTERM)
            log(f"stopped by signal {self.signum} before the program started")
        except (InputError, ToolkitError) as e:
            code = self._fail(str(e))
        except Exception as e:
            code = self._fail(f"murphy toolkit error: {type(e).__name__}: {e}")
        finally:
            self._stop_pipes()
            if thread is not None:
                thread.stop()
            if tb_thread is not None:
                tb_thread.stop()
                self._final_tensorboard_pass(tb_thread.mirror)
        self.stage("Uploading")
        return self._finish(mirror, code, ran)

    def _finish(self, mirror: TensorMirror | None, code: int, ran: bool) -> int:
        uri = self.config.get("tensor_uri")
        try:
            if mirror is not None:
                n = mirror.run_pass(final=True)
                log(f"tensors: {len(mirror.uploaded)} file(s) at {uri} ({n} in the final pass)")
            if uri and self.config.get("end_marker", True):  # several hosts: murphy writes it
                open_store(uri).put(END_MARKER, b"")
        except Exception as e:
            code = self._fail(f"cannot upload tensors to {uri}: {type(e).__name__}: {e}", code)
        out = self.config.get("output_uri")
        if out and ran and self.config.get("upload_model", True):  # several hosts: algo-1's
            try:
                store = open_store(out)
                store.put("model.tar.gz", pack_dir(self.opt_ml.model_dir))
                store.put("output.tar.gz", pack_dir(self.opt_ml.output_data_dir))
                log(f"model artifacts: {out.rstrip('/')}/model.tar.gz")
            except Exception as e:
                code = self._fail(f"cannot upload model artifacts to {out}: {type(e).__name__}: {e}", code)
        return code

    def _fail(self, message: str, code: int = 0) -> int:
        """Record a toolkit failure (unless the program already wrote one) and return the exit
        code to use: the program's own non-zero code wins."""
        log(f"error: {message}")
        path = self.opt_ml.failure_file
        # Empty is unwritten: on Kubernetes the kubelet creates the terminationMessagePath file
        # (/opt/ml/output/failure) before the container starts.
        if not os.path.exists(path) or os.path.getsize(path) == 0:
            try:
                os.makedirs(os.path.dirname(path), exist_ok=True)
                with open(path, "w", encoding="utf-8") as f:
                    f.write(message)
            except OSError as e:
                log(f"cannot write {path}: {e}")
        return code if code else 1


def read_resource_config(opt_ml: OptMl) -> dict[str, Any]:
    """``resourceconfig.json`` (empty where the runtime wrote none)."""
    rc: dict[str, Any] = read_json(opt_ml.config_file("resourceconfig.json"), {}) or {}
    return rc


def current_host(rc: Mapping[str, Any]) -> HostShard:
    """This container's host and the job's hosts, from ``resourceconfig.json`` (``rc``) as
    SageMaker's contract has them (``SM_CURRENT_HOST`` / ``SM_HOSTS`` where the file has none; a
    file-less container is the one host ``algo-1``). The one place the toolkit learns which host
    it is."""
    try:
        env_hosts = json.loads(os.environ.get("SM_HOSTS") or "[]")
    except ValueError:
        raise InputError(f"SM_HOSTS is not a JSON list: {os.environ.get('SM_HOSTS')!r}") from None
    hosts = rc.get("hosts") or env_hosts or ["algo-1"]
    current = rc.get("current_host") or os.environ.get("SM_CURRENT_HOST") or hosts[0]
    return HostShard(str(current), tuple(str(h) for h in hosts))


def _spawn_group_leader(argv: list[str], cwd: str, env: Mapping[str, str]) -> subprocess.Popen[bytes]:
    """Start ``argv`` as the leader of a new process group (same session), with the ``smdebug``
    alias on its path (it defers to a real smdebug)."""
    env = program_env(env)
    if sys.version_info >= (3, 11):
        return subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, process_group=0)
    return subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, preexec_fn=os.setpgrp)


def main() -> int:
    # In a network-less container the store is reached through the runtime's gateway; the
    # forwarder lives as long as this process, so the program it starts can use it too.
    gateway.start_from_env()
    return Toolkit(OptMl(os.environ.get(OPT_ML_ENV) or "/opt/ml")).run()
