"""Launch plans: what a job's containers are, derived from its spec (pure functions)."""

from __future__ import annotations

import dataclasses
from typing import Any

from murphy.container.env import host_names
from murphy.jobs.model import JobRecord, RuleState
from murphy.jobs.naming import debug_output_uri, rule_output_uri, s3_join
from murphy.runtimes.base import Channel, Handle, RulePlan, TrainingPlan
from murphy.settings import Settings
from murphy.storage import ObjectStore, local_bucket_store, open_store, split_s3_uri
from murphy.storage.s3 import S3ObjectStore


def hook_output_path(spec: dict[str, Any]) -> str:
    """``DebugHookConfig.S3OutputPath``; a job with rules but no hook config gets the SDK's
    default (the job's output path), so its rules have tensors to read."""
    hook = spec.get("DebugHookConfig")
    if hook and hook.get("S3OutputPath"):
        return str(hook["S3OutputPath"])
    return str(spec.get("OutputDataConfig", {}).get("S3OutputPath", ""))


def wants_tensors(spec: dict[str, Any]) -> bool:
    return bool(spec.get("DebugHookConfig") or spec.get("DebugRuleConfigurations"))


def tensor_uri(record: JobRecord) -> str | None:
    return debug_output_uri(hook_output_path(record.spec), record.name) if wants_tensors(record.spec) else None


def instance_count(record: JobRecord) -> int:
    try:
        return max(1, int(record.spec.get("ResourceConfig", {}).get("InstanceCount") or 1))
    except (TypeError, ValueError):
        return 1


def training_container(record: JobRecord, host: int = 1) -> str:
    """The container of training host ``algo-<host>`` (``algo-1``'s name is the one-host name,
    so records written before multi-instance jobs keep theirs)."""
    return f"{record.name}-training" if host == 1 else f"{record.name}-training-{host}"


def training_containers(record: JobRecord) -> list[str]:
    return [training_container(record, i) for i in range(1, instance_count(record) + 1)]


def recorded(record: JobRecord, name: str) -> Handle | None:
    """The handle the record holds for its container ``name`` (None: none, or no such name)."""
    hosts = training_containers(record)
    if name in hosts:
        handles = record.training_handles()
        i = hosts.index(name)
        return handles[i] if i < len(handles) else None
    rule = containers(record).get(name)
    return rule.handle if rule is not None else None


def rule_container(record: JobRecord, index: int) -> str:
    """The container of the ``index``-th debug rule (profiler rules have none)."""
    return f"{record.name}-rule-{index}"


def containers(record: JobRecord) -> dict[str, RuleState | None]:
    """Every container name the job may have: its training hosts' (None) and one per debug rule."""
    out: dict[str, RuleState | None] = dict.fromkeys(training_containers(record))
    out.update((rule_container(record, i), r) for i, r in enumerate(r for r in record.rules if r.kind == "debug"))
    return out


def training_plans(record: JobRecord) -> list[TrainingPlan]:
    """One plan per host, ``algo-1`` first (the others join its network where the runtime
    needs that, so it is launched first)."""
    first = training_plan(record)
    hosts = tuple(host_names(instance_count(record)))
    return [dataclasses.replace(first, container_name=training_container(record, i), current_host=host,
                                hosts=hosts, first_host_container=first.container_name)
            for i, host in enumerate(hosts, 1)]


def training_plan(record: JobRecord) -> TrainingPlan:
    spec = record.spec
    algo = spec.get("AlgorithmSpecification", {})
    resources = spec.get("ResourceConfig", {})
    channels = []
    for ch in spec.get("InputDataConfig", []) or []:
        s3 = ch.get("DataSource", {}).get("S3DataSource", {})
        channels.append(
            Channel(
                name=ch["ChannelName"],
                uri=s3.get("S3Uri", ""),
                content_type=ch.get("ContentType"),
                data_type=s3.get("S3DataType", "S3Prefix"),
                distribution=s3.get("S3DataDistributionType", "FullyReplicated"),
                input_mode=ch.get("InputMode") or algo.get("TrainingInputMode") or "File",
                record_wrapper=ch.get("RecordWrapperType") or "None",
                compression=ch.get("CompressionType") or "None",
                shuffle_seed=(ch.get("ShuffleConfig") or {}).get("Seed"),
            )
        )
    hook_config = spec.get("DebugHookConfig")
    if hook_config is None and wants_tensors(spec):
        hook_config = {"S3OutputPath": hook_output_path(spec), "CollectionConfigurations": []}
    entry = algo.get("ContainerEntrypoint")
    args = algo.get("ContainerArguments")
    tb = spec.get("TensorBoardOutputConfig")
    return TrainingPlan(
        container_name=training_container(record),
        first_host_container=training_container(record),
        job_name=record.name,
        account=record.account,
        region=record.region,
        image=algo.get("TrainingImage", ""),
        hyperparameters=dict(spec.get("HyperParameters", {}) or {}),
        environment=dict(spec.get("Environment", {}) or {}),
        instance_type=resources.get("InstanceType", "ml.m5.xlarge"),
        instance_count=instance_count(record),
        channels=tuple(channels),
        debug_hook_config=hook_config,
        tensor_uri=tensor_uri(record),
        output_uri=s3_join(spec.get("OutputDataConfig", {}).get("S3OutputPath", ""), record.name, "output"),
        container_entrypoint=tuple(entry) if entry else None,
        container_arguments=tuple(args) if args else None,
        max_runtime_s=spec.get("StoppingCondition", {}).get("MaxRuntimeInSeconds"),
        tensorboard_config=dict(tb) if tb else None,
        tensorboard_uri=s3_join(tb["S3OutputPath"], record.name, "tensorboard-output") if tb else None,
        checkpoint_uri=(spec.get("CheckpointConfig") or {}).get("S3Uri"),
    )


def rule_result_uri(record: JobRecord, rule_name: str) -> str:
    for cfg in record.spec.get("DebugRuleConfigurations", []) or []:
        if cfg["RuleConfigurationName"] == rule_name and cfg.get("S3OutputPath"):
            return rule_output_uri(cfg["S3OutputPath"], record.name, rule_name)
    return rule_output_uri(hook_output_path(record.spec), record.name, rule_name)


def rule_plan(record: JobRecord, rule: RuleState, index: int, settings: Settings) -> RulePlan:
    cfg = next(c for c in record.spec.get("DebugRuleConfigurations", []) if c["RuleConfigurationName"] == rule.name)
    base = tensor_uri(record) or debug_output_uri(hook_output_path(record.spec), record.name)
    return RulePlan(
        container_name=rule_container(record, index),
        job_name=record.name,
        account=record.account,
        region=record.region,
        rule_name=rule.name,
        image=cfg["RuleEvaluatorImage"],
        rule_parameters=dict(cfg.get("RuleParameters", {}) or {}),
        base_trial_uri=base,
        result_uri=rule.result_uri,
        environment={"MURPHY_POLL_INTERVAL": str(settings.rule_poll_interval_s)},
        instance_type=cfg.get("InstanceType"),
    )


def open_uri(settings: Settings, uri: str) -> ObjectStore:
    """The store behind an ``s3://`` URI as the service's object-store setting places it."""
    if not uri.startswith("s3://"):
        return open_store(uri)
    if settings.object_store == "local":
        return local_bucket_store(settings.resolved_buckets_dir, uri)
    bucket, prefix = split_s3_uri(uri)
    return S3ObjectStore(bucket, prefix, endpoint_url=settings.s3_endpoint_url)


def job_plans(record: JobRecord, settings: Settings) -> tuple[TrainingPlan, list[RulePlan]]:
    """The training plan (``algo-1``'s; :func:`training_plans` has every host's) and one plan
    per debug rule, indexed as the supervisor launches them (profiler rules run no container)."""
    debug_rules = [r for r in record.rules if r.kind == "debug"]
    return training_plan(record), [rule_plan(record, r, i, settings) for i, r in enumerate(debug_rules)]
