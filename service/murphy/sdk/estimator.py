"""``Estimator`` and ``PyTorch``: the SageMaker SDK's training entry points, against murphy.

``fit()`` builds the CreateTrainingJob request the stock SDK (2.x) builds for the same
arguments (section d.2 of the API reference: hyperparameter encoding, script-mode
hyperparameters, DebugHookConfig with the rules' collections, rule images by region,
``action_json``), sends it with boto3, and follows the job (:mod:`murphy.sdk.watch`).
Deliberate differences: no STS/IAM calls (a bare role name becomes an ARN), the embedded
service's default bucket is ``murphy-default``, and an unknown region is not an error.
"""

from __future__ import annotations

import copy
import io
import json
import logging
import os
import re
import tarfile
import time
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from murphy.sdk.debugger import (
    CUSTOM_RULE_EVALUATOR_IMAGE,
    DEFAULT_RULE_EVALUATOR_IMAGE,
    CollectionConfig,
    DebuggerHookConfig,
    Rule,
)
from murphy.sdk.images import custom_rule_image_uri, pytorch_image_uri, rule_image_uri
from murphy.sdk.job import TrainingJob
from murphy.sdk.session import Session, role_arn

# Script-mode hyperparameters (sagemaker.model).
DIR_PARAM_NAME = "sagemaker_submit_directory"
SCRIPT_PARAM_NAME = "sagemaker_program"
CONTAINER_LOG_LEVEL_PARAM_NAME = "sagemaker_container_log_level"
JOB_NAME_PARAM_NAME = "sagemaker_job_name"
SAGEMAKER_REGION_PARAM_NAME = "sagemaker_region"


def sagemaker_timestamp(moment: float | None = None) -> str:
    """``YYYY-MM-DD-HH-MM-SS-mmm`` (UTC), the SDK's job name suffix."""
    moment = time.time() if moment is None else moment
    millis = f"{moment:.6f}".split(".")[1][:3]
    return time.strftime(f"%Y-%m-%d-%H-%M-%S-{millis}", time.gmtime(moment))


def base_name_from_image(image: str) -> str:
    """The image's repository name: ``a/b/linear-regression-demo:latest`` → ``linear-regression-demo``."""
    m = re.match(r"^(.+/)?([^:/]+)(:[^:]+)?$", image)
    return m.group(2) if m else image


def name_from_base(base: str, max_length: int = 63, moment: float | None = None) -> str:
    timestamp = sagemaker_timestamp(moment)
    return f"{base[: max_length - len(timestamp) - 1]}-{timestamp}"


def _json_encode(hyperparameters: Mapping[str, Any]) -> dict[str, str]:
    return {str(k): json.dumps(v) for k, v in hyperparameters.items()}


def _channels(inputs: str | Mapping[str, str] | None) -> list[dict[str, Any]] | None:
    """``fit(inputs)`` as InputDataConfig: a URI is the ``training`` channel; a dict names channels."""
    if inputs is None:
        return None
    named = {"training": inputs} if isinstance(inputs, str) else dict(inputs)
    channels = []
    for name, uri in named.items():
        if not isinstance(uri, str) or not uri.startswith(("s3://", "file://")):
            raise ValueError(f'URI input {uri} must be a valid S3 or FILE URI: must start with "s3://" or "file://"')
        channels.append({"DataSource": {"S3DataSource": {"S3DataType": "S3Prefix", "S3Uri": uri}}, "ChannelName": name})
    return channels


def source_tarball(entry_point: str, source_dir: str | None) -> bytes:
    """``sourcedir.tar.gz`` like the SDK: ``source_dir``'s contents, or the entry point alone."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        if source_dir:
            for name in sorted(os.listdir(source_dir)):
                tar.add(os.path.join(source_dir, name), arcname=name)
        else:
            tar.add(entry_point, arcname=os.path.basename(entry_point))
    return buf.getvalue()


class Estimator:
    """A training job template: image or script, resources, hyperparameters, Debugger rules."""

    def __init__(
        self,
        entry_point: str | None = None,
        source_dir: str | None = None,
        image_uri: str | None = None,
        role: str | None = None,
        instance_count: int = 1,
        instance_type: str = "ml.m5.xlarge",
        hyperparameters: Mapping[str, Any] | None = None,
        output_path: str | None = None,
        base_job_name: str | None = None,
        rules: Sequence[Rule] | None = None,
        debugger_hook_config: DebuggerHookConfig | bool | None = None,
        max_run: int = 86400,
        environment: Mapping[str, str] | None = None,
        endpoint: str | None = None,
        sagemaker_session: Session | None = None,
        *,
        volume_size: int = 30,
        input_mode: str = "File",
        container_log_level: int = logging.INFO,
        tags: Sequence[Mapping[str, str]] | None = None,
        disable_profiler: bool = False,
        container_entry_point: Sequence[str] | None = None,
        container_arguments: Sequence[str] | None = None,
    ) -> None:
        if sagemaker_session is not None and endpoint is not None:
            raise ValueError("give either endpoint or sagemaker_session, not both")
        self.sagemaker_session = sagemaker_session or Session(endpoint=endpoint)
        self.entry_point = entry_point
        self.source_dir = source_dir
        self.image_uri = image_uri
        self.role = role
        self.instance_count = instance_count
        self.instance_type = instance_type
        self.output_path = output_path
        self.base_job_name = base_job_name
        self.rules = list(rules) if rules is not None else None
        self.debugger_hook_config = debugger_hook_config
        self.max_run = max_run
        self.environment = dict(environment) if environment is not None else None
        self.volume_size = volume_size
        self.input_mode = input_mode
        self.container_log_level = container_log_level
        self.tags = [dict(t) for t in tags] if tags is not None else None
        self.disable_profiler = disable_profiler
        # SageMaker 2.x's names; sent as ContainerEntrypoint/ContainerArguments (an entrypoint
        # naming /opt/ml/... sees the job's /opt/ml on every runtime, docs/runtimes.md).
        self.container_entry_point = list(container_entry_point) if container_entry_point is not None else None
        self.container_arguments = list(container_arguments) if container_arguments is not None else None
        self.latest_training_job: TrainingJob | None = None
        self._current_job_name: str | None = None
        #: The DebugHookConfig of the latest request (the user's object is never modified).
        self._effective_hook: DebuggerHookConfig | None = None
        self._hyperparameters: dict[str, Any] = {}
        self.set_hyperparameters(**dict(hyperparameters or {}))

    # --- what the SDK's Estimator computes -------------------------------------------------

    def training_image_uri(self) -> str:
        if not self.image_uri:
            raise ValueError("image_uri is required (or use murphy.sdk.PyTorch for a framework image)")
        return self.image_uri

    def set_hyperparameters(self, **kwargs: Any) -> None:
        """Like the SDK's generic Estimator: JSON-encoded when a source_dir is given, else kept
        as given (``str()``-ed when the request is built)."""
        self._hyperparameters.update(_json_encode(kwargs) if self.source_dir else kwargs)

    def hyperparameters(self) -> dict[str, Any]:
        return self._hyperparameters

    def _script_mode_hyperparameters(self, code_dir: str, script: str) -> dict[str, Any]:
        return {
            DIR_PARAM_NAME: code_dir,
            SCRIPT_PARAM_NAME: script,
            CONTAINER_LOG_LEVEL_PARAM_NAME: self.container_log_level,
            JOB_NAME_PARAM_NAME: self._current_job_name,
            SAGEMAKER_REGION_PARAM_NAME: self.sagemaker_session.boto_region_name,
        }

    def _update_script_mode_hyperparameters(self, code_dir: str, script: str) -> None:
        self._hyperparameters.update(_json_encode(self._script_mode_hyperparameters(code_dir, script)))

    def _base_job_name(self) -> str:
        return self.base_job_name or base_name_from_image(self.training_image_uri())

    def _extra_algorithm_specification(self) -> dict[str, Any]:
        return {}

    # --- fit -------------------------------------------------------------------------------

    def _prepare_for_training(self, job_name: str | None) -> None:
        self._current_job_name = job_name or name_from_base(self._base_job_name())
        if self.output_path is None:
            self.output_path = f"s3://{self.sagemaker_session.default_bucket()}/"
        if self.entry_point or self.source_dir:
            self._stage_user_code()

    def _stage_user_code(self) -> None:
        if not self.entry_point:
            raise ValueError("source_dir needs an entry_point (the script inside it to run)")
        if self.source_dir and self.source_dir.startswith("s3://"):
            code_uri, script = self.source_dir, self.entry_point
        else:
            if self.source_dir and not os.path.isfile(os.path.join(self.source_dir, self.entry_point)):
                raise ValueError(f'No file named "{self.entry_point}" was found in directory "{self.source_dir}".')
            if not self.source_dir and not os.path.isfile(self.entry_point):
                raise ValueError(f'No file named "{self.entry_point}" was found.')
            bucket = self.output_path.removeprefix("s3://").split("/", 1)[0] if self.output_path else ""
            if not self.output_path or not self.output_path.startswith("s3://") or not bucket:
                raise ValueError(f"output_path must be an s3:// URI to stage the source code, got {self.output_path!r}")
            code_uri = f"s3://{bucket}/{self._current_job_name}/source/sourcedir.tar.gz"
            self.sagemaker_session.upload_bytes(source_tarball(self.entry_point, self.source_dir), code_uri)
            script = self.entry_point if self.source_dir else os.path.basename(self.entry_point)
        self._update_script_mode_hyperparameters(code_uri, script)

    def _resolve_rule(self, rule: Rule) -> Rule:
        rule = copy.copy(rule)
        rule.rule_parameters = dict(rule.rule_parameters)
        region = self.sagemaker_session.boto_region_name
        if rule.image_uri == DEFAULT_RULE_EVALUATOR_IMAGE:
            rule.image_uri = rule_image_uri(region)
            rule.instance_type = rule.volume_size_in_gb = None
        elif rule.image_uri == CUSTOM_RULE_EVALUATOR_IMAGE:
            rule.image_uri = custom_rule_image_uri(region)
        source = rule.rule_parameters.get("source_s3_uri")
        if source and not source.startswith("s3://"):
            rule.rule_parameters["source_s3_uri"] = self._upload_rule_source(rule.name, source)
        assert self._current_job_name is not None
        rule.prepare_actions(self._current_job_name)
        return rule

    def _upload_rule_source(self, rule_name: str, path: str) -> str:
        """``s3://<default bucket>/<rule>/<uuid4>/<file>`` like the SDK; without a default bucket
        (a real server) the output path's bucket."""
        try:
            bucket = self.sagemaker_session.default_bucket()
        except ValueError:
            bucket = str(self.output_path).removeprefix("s3://").split("/", 1)[0]
        with open(path, "rb") as f:
            data = f.read()
        return self.sagemaker_session.upload_bytes(data, f"s3://{bucket}/{rule_name}/{uuid.uuid4()}/{os.path.basename(path)}")

    def _debugger_request(self) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
        """DebugRuleConfigurations and DebugHookConfig, as the SDK's ``_prepare_debugger_for_training``."""
        rules = list(self.rules or [])
        for r in rules:
            if not isinstance(r, Rule):
                raise RuntimeError("Rules list can only contain murphy.sdk.Rule")
        hook = self.debugger_hook_config
        if hook is False:
            self._effective_hook = None
            return [self._resolve_rule(r).to_debugger_rule_config_dict() for r in rules], None
        hook = copy.copy(hook) if isinstance(hook, DebuggerHookConfig) else DebuggerHookConfig()
        if not hook.s3_output_path:
            hook.s3_output_path = self.output_path
        configs = [self._resolve_rule(r).to_debugger_rule_config_dict() for r in rules]
        # The SDK de-duplicates through a set; first-seen order keeps the request deterministic.
        merged: dict[CollectionConfig, None] = {}
        for r in rules:
            merged.update(dict.fromkeys(r.collection_configs))
        merged.update(dict.fromkeys(hook.collection_configs or []))
        hook.collection_configs = list(merged)
        self._effective_hook = hook
        return configs, hook._to_request_dict()

    def training_request(self, inputs: str | Mapping[str, str] | None = None, job_name: str | None = None) -> dict[str, Any]:
        """Prepare a job (name, output path, uploads) and return its CreateTrainingJob body."""
        self._prepare_for_training(job_name)
        assert self._current_job_name is not None and self.output_path is not None
        rule_configs, hook = self._debugger_request()
        algorithm: dict[str, Any] = {"TrainingInputMode": self.input_mode, "TrainingImage": self.training_image_uri()}
        algorithm.update(self._extra_algorithm_specification())
        if self.container_entry_point is not None:
            algorithm["ContainerEntrypoint"] = self.container_entry_point
        if self.container_arguments is not None:
            algorithm["ContainerArguments"] = self.container_arguments
        request: dict[str, Any] = {
            "AlgorithmSpecification": algorithm,
            "OutputDataConfig": {"S3OutputPath": self.output_path},
            "TrainingJobName": self._current_job_name,
            "StoppingCondition": {"MaxRuntimeInSeconds": self.max_run},
            "ResourceConfig": {"VolumeSizeInGB": self.volume_size, "InstanceCount": self.instance_count,
                               "InstanceType": self.instance_type},
            "RoleArn": role_arn(self.role),
        }
        channels = _channels(inputs)
        if channels is not None:
            request["InputDataConfig"] = channels
        hyperparameters = {str(k): str(v) for k, v in self.hyperparameters().items()}
        if hyperparameters:
            request["HyperParameters"] = hyperparameters
        if self.environment is not None:
            request["Environment"] = self.environment
        if self.tags is not None:
            request["Tags"] = self.tags
        if rule_configs:
            request["DebugRuleConfigurations"] = rule_configs
        if hook is not None:
            request["DebugHookConfig"] = hook
        request["ProfilerConfig"] = (
            {"DisableProfiler": True} if self.disable_profiler else {"S3OutputPath": self.output_path, "DisableProfiler": False}
        )
        return request

    def fit(self, inputs: str | Mapping[str, str] | None = None, wait: bool = True, logs: bool | str = True,
            job_name: str | None = None) -> None:
        """Create the training job; with ``wait``, follow it to its end (see :meth:`TrainingJob.wait`)."""
        request = self.training_request(inputs, job_name)
        self.sagemaker_session.sagemaker_client.create_training_job(**request)
        if logs not in (False, "None"):
            # The server (embedded or not) serves the dashboard at /ui/ on the API's port.
            print(f"Dashboard: {self.sagemaker_session.endpoint.rstrip('/')}/ui/jobs/{request['TrainingJobName']}",
                  flush=True)
        self.latest_training_job = TrainingJob(self.sagemaker_session, request["TrainingJobName"],
                                               self.latest_job_debugger_artifacts_path())
        if wait:
            self.latest_training_job.wait(logs=logs)

    def latest_job_debugger_artifacts_path(self) -> str | None:
        """``<DebugHookConfig.S3OutputPath>/<job>/debug-output`` (string work, no call)."""
        if self._current_job_name is None:
            raise ValueError("Cannot get the Debugger artifacts path. The Estimator is not associated with a training job.")
        hook = self._effective_hook
        if hook is None or not hook.s3_output_path:
            return None
        return os.path.join(hook.s3_output_path, self._current_job_name, "debug-output")


class PyTorch(Estimator):
    """Script mode on the AWS PyTorch training image of ``framework_version``/``py_version``."""

    def __init__(self, entry_point: str, framework_version: str | None = None, py_version: str | None = None,
                 source_dir: str | None = None, image_uri: str | None = None, **kwargs: Any) -> None:
        if framework_version is None and image_uri is None:
            raise ValueError("framework_version or image_uri must be specified")
        self.framework_version = framework_version
        self.py_version = py_version
        super().__init__(entry_point=entry_point, source_dir=source_dir, image_uri=image_uri, **kwargs)

    def training_image_uri(self) -> str:
        if self.image_uri:
            return self.image_uri
        assert self.framework_version is not None
        return pytorch_image_uri(self.sagemaker_session.boto_region_name, self.framework_version, self.py_version,
                                 self.instance_type)

    def set_hyperparameters(self, **kwargs: Any) -> None:
        self._hyperparameters.update(kwargs)

    def hyperparameters(self) -> dict[str, Any]:
        # Framework estimators JSON-encode every hyperparameter, theirs and yours.
        return _json_encode(self._hyperparameters)

    def _update_script_mode_hyperparameters(self, code_dir: str, script: str) -> None:
        self._hyperparameters.update(self._script_mode_hyperparameters(code_dir, script))

    def _extra_algorithm_specification(self) -> dict[str, Any]:
        return {"EnableSageMakerMetricsTimeSeries": True}
