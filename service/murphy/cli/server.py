"""``murphy server``: the control plane (API + supervisor) in one process."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from typing import Any


def settings_from_args(args: argparse.Namespace) -> Any:
    from murphy.settings import Settings

    overrides = {
        key: value
        for key, value in {
            "host": args.host,
            "port": args.port,
            "data_dir": args.data_dir,
            "database_url": args.database_url,
            "object_store": args.object_store,
            "s3_endpoint_url": args.s3_endpoint_url,
            "runtime": args.runtime,
            "docker_host": args.docker_host,
            "docker_network": args.docker_network,
            "kubernetes_namespace": args.kubernetes_namespace,
            "kubernetes_kubeconfig": args.kubeconfig,
            "kubernetes_context": args.kube_context,
            "kubernetes_api_server": args.kubernetes_api_server,
            "kubernetes_profiles": args.instance_profiles,
            "kubernetes_s3_gateway_url": args.pods_s3_gateway_url,
            "kubernetes_s3_gateway_listen": args.s3_gateway_listen,
            "auth": args.auth,
        }.items()
        if value is not None
    }
    if args.no_stop_on_finding:
        overrides["stop_on_finding"] = False
    return Settings(**overrides)


def _server_class() -> Any:
    import uvicorn

    class Server(uvicorn.Server):
        """Event streams never end by themselves: uvicorn would wait for them until its graceful
        shutdown timeout. Ask them to end as soon as the server is told to exit."""

        def __init__(self, config: uvicorn.Config, on_exit: Any) -> None:
            super().__init__(config)
            self._on_exit = on_exit

        def handle_exit(self, sig: int, frame: Any) -> None:
            self._on_exit()
            super().handle_exit(sig, frame)

    return Server


def is_loopback(host: str) -> bool:
    import ipaddress

    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def refusal(settings: Any) -> str | None:
    """Why the server must not start as configured (None: it may)."""
    if settings.auth == "none" and not is_loopback(settings.host):
        return (f"murphy server: refusing to listen on {settings.host} without authentication: anyone who can "
                "reach it could run code in training jobs and read every job. Enable SigV4: create a key with "
                "'murphy keys create --account 123456789012' (same --data-dir/--database-url), then start with "
                f"'murphy server --auth sigv4 --host {settings.host}' (or MURPHY_AUTH=sigv4); see docs/security.md. "
                "Without auth, bind 127.0.0.1.")
    return None


def header_timeout_protocol(seconds: float) -> Any:
    """uvicorn's h11 protocol with a deadline for a request's headers: a client that opens a
    connection (or finishes a response) and then sends its headers slower than ``seconds``
    (slow loris) gets a 408 and a closed connection. uvicorn alone waits for ever; the body
    has its own deadline in :mod:`murphy.api.edge`."""
    from uvicorn.protocols.http.h11_impl import H11Protocol

    timeout_408 = b"HTTP/1.1 408 Request Timeout\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"

    class Protocol(H11Protocol):
        _header_timer: Any = None
        _armed_for: Any = None

        def _arm(self) -> None:
            if self._header_timer is not None:
                self._header_timer.cancel()
            self._armed_for = self.cycle  # a request whose headers complete makes a new cycle
            self._header_timer = self.loop.call_later(seconds, self._headers_late)

        def _headers_late(self) -> None:
            self._header_timer = None
            if self.cycle is self._armed_for and not self.transport.is_closing():
                self.transport.write(timeout_408)
                self.transport.close()

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            self._arm()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing():
                self._arm()

        def connection_lost(self, exc: Exception | None) -> None:
            if self._header_timer is not None:
                self._header_timer.cancel()
            super().connection_lost(exc)

    return Protocol


def cmd_server(args: argparse.Namespace) -> int:
    import uvicorn

    from murphy.api.app import create_app
    from murphy.jobs.plane import ControlPlane

    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    settings = settings_from_args(args)
    problem = refusal(settings)
    if problem:
        print(problem, file=sys.stderr)
        return 2
    if bool(args.tls_cert) != bool(args.tls_key):
        print("murphy server: --tls-cert and --tls-key go together", file=sys.stderr)
        return 2
    from murphy.exceptions import RuntimeBackendError

    try:
        plane = ControlPlane.from_settings(settings)
    except RuntimeBackendError as e:  # e.g. --runtime kubernetes without a usable configuration
        print(f"murphy server: {e}", file=sys.stderr)
        return 2
    plane.start()
    try:
        app = create_app(plane.service, settings, getattr(plane, "bus", None))
        scheme = "https" if args.tls_cert else "http"
        print(f"murphy server on {scheme}://{settings.host}:{settings.port} (data: {settings.data_dir}, "
              f"store: {settings.resolved_database_url.split('@')[-1]}, runtime: {settings.runtime}, "
              f"auth: {settings.auth})", flush=True)
        if settings.auth == "sigv4" and not getattr(plane.store, "list_access_keys", list)():
            print("murphy server: no access keys yet: every request is refused until you create one with "
                  "'murphy keys create --account 123456789012'", flush=True)
        config = uvicorn.Config(app, host=settings.host, port=settings.port, log_level=args.log_level,
                                access_log=False, timeout_graceful_shutdown=5,
                                ssl_certfile=args.tls_cert, ssl_keyfile=args.tls_key,
                                timeout_keep_alive=args.keep_alive_timeout,
                                http=header_timeout_protocol(settings.header_timeout_s),
                                # h11 answers a plain-text 400 past this; the edge's own, smaller
                                # limit answers first with an AWS-shaped error.
                                h11_max_incomplete_event_size=4 * settings.max_header_bytes)

        def close_streams() -> None:
            app.state.events.close_streams()
            app.state.ui.close_streams()

        _server_class()(config, on_exit=close_streams).run()
    finally:
        plane.close()
    return 0


def add_parser(sub: Any) -> None:
    p = sub.add_parser("server", help="run the control plane: SageMaker-compatible API + supervisor")
    p.add_argument("--host", help="bind address (default 127.0.0.1)")
    p.add_argument("--port", type=int, help="port (default 8080)")
    p.add_argument("--data-dir", help="jobs, logs, SQLite database, local buckets (default ~/.murphy)")
    p.add_argument("--database-url", help="SQLAlchemy URL (default SQLite under the data dir)")
    p.add_argument("--object-store", choices=["local", "s3"], help="where s3:// URIs live (default local)")
    p.add_argument("--s3-endpoint-url", help="S3 endpoint for --object-store s3")
    p.add_argument("--runtime", choices=["process", "docker", "kubernetes", "fake"],
                   help="where containers run: local processes (default), Docker containers, or Kubernetes Jobs")
    p.add_argument("--docker-host", help="Docker engine address for --runtime docker (default DOCKER_HOST)")
    p.add_argument("--docker-network", choices=["none", "host"],
                   help="containers' network (default none: the S3 endpoint only, through murphy's gateway)")
    k = p.add_argument_group("--runtime kubernetes (docs/kubernetes.md)")
    k.add_argument("--kubernetes-namespace", help="the namespace of every job's objects (default murphy-jobs)")
    k.add_argument("--kubeconfig", help="kubeconfig file (default: KUBECONFIG, in-cluster, ~/.kube/config)")
    k.add_argument("--kube-context", help="the kubeconfig context to use (default: its current context)")
    k.add_argument("--kubernetes-api-server", help="a bare API server URL without authentication (kubectl proxy)")
    k.add_argument("--instance-profiles", help="instance profiles, a JSON file (node selectors, tolerations, resources)")
    k.add_argument("--pods-s3-gateway-url",
                   help="murphy's S3 gateway as pods reach it (default: in a cluster http://murphy.<namespace>.svc:8081, "
                        "else the loopback listener)")
    k.add_argument("--s3-gateway-listen", help="host:port to serve that gateway on (default: 0.0.0.0:<its port> in a "
                                                "cluster or with --pods-s3-gateway-url, else loopback)")
    p.add_argument("--no-stop-on-finding", action="store_true",
                   help="AWS semantics: a rule finding stops the job only through a StopTraining action")
    p.add_argument("--auth", choices=["none", "sigv4"],
                   help="sigv4: verify every request's AWS signature against murphy's access keys "
                        "(murphy keys create); none (default) is only allowed on a loopback --host")
    # Also from the environment (an empty value: none), for deployments whose argv is fixed (compose).
    p.add_argument("--tls-cert", default=os.environ.get("MURPHY_TLS_CERT") or None,
                   help="serve HTTPS with this PEM certificate (with --tls-key) [MURPHY_TLS_CERT]")
    p.add_argument("--tls-key", default=os.environ.get("MURPHY_TLS_KEY") or None,
                   help="the certificate's PEM private key [MURPHY_TLS_KEY]")
    p.add_argument("--keep-alive-timeout", type=float, default=5.0,
                   help="seconds an idle connection is kept open (default 5)")
    p.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    p.set_defaults(func=cmd_server)
