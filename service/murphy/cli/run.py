"""``murphy run SCRIPT``: train a script with Debugger rules, without writing Python to launch it.

    murphy run train.py --rule exploding_tensor --hp lr=100 --hp scale=1e11

runs ``SCRIPT`` in SageMaker script mode through :class:`murphy.sdk.Estimator` (PyTorch 2.1
training image unless ``--image``), on ``--endpoint``, ``$MURPHY_ENDPOINT`` or an embedded
service, and waits with the log and the rule box. Exit status:

* 0: the job Completed and no rule found issues;
* 1: the job Failed, or could not be created;
* 2: bad command line (argparse's usage error);
* 3: a rule found issues (the job was stopped by it, or completed on a server with AWS semantics);
* 4: the job was stopped without a finding (Ctrl-C, StopTrainingJob, max runtime);
* 130: interrupted while waiting (the job was left running).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

EXIT_COMPLETED, EXIT_FAILED, EXIT_ISSUES_FOUND, EXIT_STOPPED, EXIT_INTERRUPTED = 0, 1, 3, 4, 130
DEFAULT_FRAMEWORK_VERSION = "2.1"
_NOT_RULES = {"get_rule_config", "get_rule_groups", "is_valid_action_object"}


def rule_function_names() -> list[str]:
    """``exploding_tensor``, ``vanishing_gradient`` ...: the built-in rules' rule_configs functions."""
    from murphy.sdk import rule_configs

    return sorted(n for n in rule_configs.__all__ if n.islower() and n not in _NOT_RULES)


def rule_config(name: str) -> dict[str, Any]:
    """A built-in rule's config by function name (``exploding_tensor``) or class name (``ExplodingTensor``)."""
    from murphy.sdk import rule_configs

    if name in rule_function_names():
        config: dict[str, Any] = getattr(rule_configs, name)()
        return config
    try:
        return rule_configs.get_rule_config(name)
    except KeyError:
        raise argparse.ArgumentTypeError(
            f"unknown rule {name!r}; known: {', '.join(rule_function_names())}"
        ) from None


def hyperparameter(text: str) -> tuple[str, Any]:
    """``key=value``; the value is JSON when it parses (``100``, ``1e11``, ``true``), else a string."""
    key, sep, raw = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected key=value, got {text!r}")
    try:
        return key, json.loads(raw)
    except ValueError:
        return key, raw


def channel(text: str) -> tuple[str, str]:
    """``s3://...`` (the ``training`` channel) or ``name=s3://...``."""
    name, sep, uri = text.partition("=")
    return (name, uri) if sep and not name.startswith(("s3:", "file:")) else ("training", text)


def exit_code(description: dict[str, Any]) -> int:
    rules = description.get("DebugRuleEvaluationStatuses", []) + description.get("ProfilerRuleEvaluationStatuses", [])
    status = description["TrainingJobStatus"]
    if status == "Failed":
        return EXIT_FAILED
    if any(r.get("RuleEvaluationStatus") == "IssuesFound" for r in rules):
        return EXIT_ISSUES_FOUND
    return EXIT_COMPLETED if status == "Completed" else EXIT_STOPPED


def cmd_run(args: argparse.Namespace) -> int:
    from botocore.exceptions import BotoCoreError, ClientError

    from murphy.sdk import Estimator, PyTorch, Rule, UnexpectedStatusException
    from murphy.sdk.session import Session

    session = Session(endpoint=args.endpoint, region=args.region)
    common: dict[str, Any] = {
        "entry_point": args.script,
        "source_dir": args.source_dir,
        "hyperparameters": dict(args.hp),
        "output_path": args.output_path,
        "base_job_name": args.base_job_name,
        "rules": [Rule.sagemaker(c) for c in args.rule],
        "instance_type": args.instance_type,
        "max_run": args.max_run,
        "sagemaker_session": session,
    }
    estimator: Estimator = (
        Estimator(image_uri=args.image, **common) if args.image
        else PyTorch(framework_version=args.framework_version, **common)
    )
    inputs = dict(args.input) or None
    if not args.wait and session.embedded:
        print("murphy run: --no-wait needs a murphy server (--endpoint or $MURPHY_ENDPOINT); an embedded "
              "service stops its jobs when this process exits", file=sys.stderr)
        return EXIT_FAILED
    try:
        estimator.fit(inputs, wait=False, job_name=args.job_name)
        job = estimator.latest_training_job
        assert job is not None
        print(f"training job {job.name} created on {session.endpoint}", flush=True)
        if not args.wait:
            return EXIT_COMPLETED
        description = job.wait(logs=True)
    except UnexpectedStatusException as e:
        print(f"murphy run: {e}", file=sys.stderr)
        return EXIT_FAILED
    except (ClientError, BotoCoreError, ValueError, OSError) as e:
        print(f"murphy run: {e}", file=sys.stderr)
        return EXIT_FAILED
    except KeyboardInterrupt:
        print("\nmurphy run: interrupted; the job keeps running on a remote server "
              "(an embedded one stops it on exit)", file=sys.stderr)
        return EXIT_INTERRUPTED
    return exit_code(description)


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "run", help="train a script (script mode) with Debugger rules and wait for the verdict",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("script", help="the training script (with --source-dir: its path inside that directory)")
    p.add_argument("--rule", action="append", type=rule_config, default=[], metavar="NAME",
                   help="a built-in rule by rule_configs function name, e.g. exploding_tensor (repeatable)")
    p.add_argument("--hp", action="append", type=hyperparameter, default=[], metavar="KEY=VALUE",
                   help="a hyperparameter, passed to the script as --KEY VALUE (repeatable)")
    p.add_argument("--image", help="training image URI (default: the AWS PyTorch training image)")
    p.add_argument("--framework-version", default=DEFAULT_FRAMEWORK_VERSION,
                   help=f"PyTorch version of the default image (default {DEFAULT_FRAMEWORK_VERSION})")
    p.add_argument("--source-dir", help="directory uploaded with the script (default: the script alone)")
    p.add_argument("--input", action="append", type=channel, default=[], metavar="[CHANNEL=]URI",
                   help="an input channel (default channel name: training; repeatable)")
    p.add_argument("--endpoint", help="murphy server URL (default $MURPHY_ENDPOINT, else an embedded service)")
    p.add_argument("--region", help="region for ARNs and images (default: boto3's, else us-east-1)")
    p.add_argument("--output-path", help="s3:// URI for outputs and tensors (default: the default bucket)")
    p.add_argument("--job-name", help="training job name (default <base>-<timestamp>)")
    p.add_argument("--base-job-name", help="job name prefix (default: the image's repository name)")
    p.add_argument("--instance-type", default="ml.m5.xlarge")
    p.add_argument("--max-run", type=int, default=86400, help="MaxRuntimeInSeconds (default 86400)")
    p.add_argument("--no-wait", dest="wait", action="store_false", help="create the job and return")
    p.set_defaults(func=cmd_run)
