"""``murphy kubernetes render``: every Kubernetes object murphy makes for a CreateTrainingJob
request, as YAML for ``kubectl apply -f -``, with nothing contacted.

The request goes through the API's own operation (validation included) into an in-memory job
store, and the job's plans through the builders the Kubernetes runtime uses
(:mod:`murphy.runtimes.kubernetes_objects`), so what this prints is what would be created, with
one difference: each Secret's key is a placeholder (the runtime issues a key per Secret at launch,
murphy's S3 gateway honours only those), so no secret value reaches the output.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from murphy.exceptions import MurphyError, RuntimeBackendError, ServiceError


def _record(request: dict[str, Any], account: str, region: str) -> tuple[Any, Any]:
    from murphy.api.caller import Caller
    from murphy.api.sagemaker_ops import create_training_job
    from murphy.jobs.service import JobService
    from murphy.runtimes.fake import FakeRuntime
    from murphy.settings import Settings
    from murphy.store.memory import InMemoryJobStore

    settings = Settings()
    store = InMemoryJobStore()
    service = JobService(store, FakeRuntime(), settings)
    create_training_job(service, Caller("render", region or settings.default_region,
                                        account or settings.default_account), request)
    return store.get(str(request["TrainingJobName"])), settings


def render(args: argparse.Namespace) -> int:
    from murphy.jobs.plans import job_plans
    from murphy.runtimes.catalog import ImageCatalog
    from murphy.runtimes.kubernetes_objects import CREDENTIAL_KEYS, KubernetesOptions, job_objects
    from murphy.runtimes.kubernetes_resources import load_profiles

    try:
        request = json.loads(Path(args.request).read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        print(f"murphy kubernetes render: cannot read {args.request}: {e}", file=sys.stderr)
        return 2
    if not isinstance(request, dict):
        print(f"murphy kubernetes render: {args.request} holds no CreateTrainingJob request object", file=sys.stderr)
        return 2
    try:
        record, settings = _record(request, args.account, args.region)
        training, rules = job_plans(record, settings)
        opts = KubernetesOptions(
            namespace=args.namespace, runtime_id=args.runtime_id,
            s3_endpoint_url=args.s3_endpoint or KubernetesOptions.s3_endpoint_url,
            utility_image=args.utility_image or KubernetesOptions.utility_image,
            profiles=tuple(load_profiles(args.profiles)) if args.profiles else (),
            catalog=ImageCatalog.load(settings.image_catalog))
        credentials = {k: os.environ[k] for k in CREDENTIAL_KEYS if k in os.environ} if args.credentials_from_env else None
        objects = job_objects(training, rules, opts, credentials)
    except ServiceError as e:
        print(f"{e.code}: {e.message}", file=sys.stderr)
        return 2
    except (RuntimeBackendError, MurphyError) as e:
        print(f"murphy kubernetes render: {e}", file=sys.stderr)
        return 2
    if not args.credentials_from_env:
        print("note: the Secrets hold placeholders: murphy's runtime issues each its own S3 key at launch, valid only "
              "through its S3 gateway (--credentials-from-env copies AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY from "
              "this environment instead, for manifests applied without murphy)", file=sys.stderr)
    sys.stdout.write(to_yaml(objects))
    return 0


def to_yaml(objects: list[dict[str, Any]]) -> str:
    """A YAML stream, one document per object; multi-line strings (the config files) as blocks."""
    import yaml

    class Dumper(yaml.SafeDumper):
        pass

    def text(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
        # PyYAML falls back to a quoted style where a block cannot hold the text exactly.
        style = "|" if "\n" in value else None
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)

    Dumper.add_representer(str, text)
    return yaml.dump_all(objects, Dumper=Dumper, sort_keys=False, default_flow_style=False, width=1 << 16)


def add_parser(sub: Any) -> None:
    p = sub.add_parser("kubernetes", help="Kubernetes manifests for training jobs (docs/kubernetes.md)")
    ksub = p.add_subparsers(dest="kubernetes_command", required=True)
    r = ksub.add_parser("render", help="print, as YAML for `kubectl apply -f -`, the objects of a CreateTrainingJob request")
    r.add_argument("--request", required=True, help="a CreateTrainingJob request as JSON (the API's shape)")
    r.add_argument("--namespace", default="murphy-jobs", help="the jobs' namespace (default: murphy-jobs)")
    r.add_argument("--s3-endpoint", help="the S3 endpoint as pods see it (default: murphy's S3 gateway behind the base "
                                          "manifests' Service, http://murphy.murphy.svc.cluster.local:8081)")
    r.add_argument("--profiles", help="instance profiles, a JSON file (docs/kubernetes.md)")
    r.add_argument("--utility-image", help="image of the init container that lays out /opt/ml")
    r.add_argument("--runtime-id", default="murphy", help="which murphy installation owns the objects (a label)")
    r.add_argument("--account", default="", help="the account the job belongs to (default: the server's default)")
    r.add_argument("--region", default="", help="the region (default: the server's default)")
    r.add_argument("--credentials-from-env", action="store_true",
                   help="put AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY (and session token, region) of this environment "
                        "in every Secret, for manifests applied without murphy (default: placeholders)")
    r.set_defaults(func=render)
