"""``murphy server``: the control plane (API + supervisor) in one process."""

from __future__ import annotations

import argparse
import logging
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


def cmd_server(args: argparse.Namespace) -> int:
    import uvicorn

    from murphy.api.app import create_app
    from murphy.jobs.plane import ControlPlane

    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    settings = settings_from_args(args)
    plane = ControlPlane.from_settings(settings)
    plane.start()
    try:
        app = create_app(plane.service, settings, getattr(plane, "bus", None))
        print(f"murphy server on http://{settings.host}:{settings.port} (data: {settings.data_dir}, "
              f"store: {settings.resolved_database_url.split('@')[-1]}, runtime: {settings.runtime})", flush=True)
        config = uvicorn.Config(app, host=settings.host, port=settings.port, log_level=args.log_level,
                                access_log=False, timeout_graceful_shutdown=5)
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
    p.add_argument("--runtime", choices=["process", "docker", "fake"],
                   help="where containers run: local processes (default) or Docker containers")
    p.add_argument("--docker-host", help="Docker engine address for --runtime docker (default DOCKER_HOST)")
    p.add_argument("--docker-network", choices=["none", "host"],
                   help="containers' network (default none: the S3 endpoint only, through murphy's gateway)")
    p.add_argument("--no-stop-on-finding", action="store_true",
                   help="AWS semantics: a rule finding stops the job only through a StopTraining action")
    p.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    p.set_defaults(func=cmd_server)
