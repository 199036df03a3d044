"""``Rule``, ``DebuggerHookConfig``, ``CollectionConfig``: the SageMaker SDK's Debugger objects.

Same constructors and the same request dictionaries as ``sagemaker.debugger`` (2.x): the
estimator resolves ``Rule.sagemaker``'s image for its region, fills in the StopTraining
prefix, uploads a local custom rule ``source`` and merges every rule's ``collections_to_save``
into the DebugHookConfig, as the SDK does at ``fit()``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from murphy.sdk.rule_configs import Action, ActionList, is_valid_action_object

#: Placeholder the estimator replaces with the region's built-in rule image (the SDK's own).
DEFAULT_RULE_EVALUATOR_IMAGE = "DEFAULT_RULE_EVALUATOR_IMAGE"
#: Placeholder for :meth:`Rule.custom` without ``image_uri``: the region's custom rule evaluator.
CUSTOM_RULE_EVALUATOR_IMAGE = "DEFAULT_CUSTOM_RULE_EVALUATOR_IMAGE"


class CollectionConfig:
    """A tensor collection to save, with smdebug parameters (``save_interval``, ``include_regex`` ...)."""

    def __init__(self, name: str, parameters: Mapping[str, str] | None = None) -> None:
        self.name = name
        self.parameters = dict(parameters) if parameters is not None else None

    def _key(self) -> tuple[str, tuple[tuple[str, str], ...]]:
        return self.name, tuple(sorted((self.parameters or {}).items()))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, CollectionConfig):
            raise TypeError("CollectionConfig is only comparable with other CollectionConfig objects.")
        return self.name == other.name and self.parameters == other.parameters

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return f"CollectionConfig(name={self.name!r}, parameters={self.parameters!r})"

    def _to_request_dict(self) -> dict[str, Any]:
        request: dict[str, Any] = {"CollectionName": self.name}
        if self.parameters is not None:
            request["CollectionParameters"] = self.parameters
        return request


class DebuggerHookConfig:
    """Where and what the training job's hook saves (``DebugHookConfig``)."""

    def __init__(
        self,
        s3_output_path: str | None = None,
        container_local_output_path: str | None = None,
        hook_parameters: Mapping[str, str] | None = None,
        collection_configs: Sequence[CollectionConfig] | None = None,
    ) -> None:
        self.s3_output_path = s3_output_path
        self.container_local_output_path = container_local_output_path
        self.hook_parameters = dict(hook_parameters) if hook_parameters is not None else None
        self.collection_configs = list(collection_configs) if collection_configs is not None else None

    def _to_request_dict(self) -> dict[str, Any]:
        request: dict[str, Any] = {"S3OutputPath": self.s3_output_path}
        if self.container_local_output_path is not None:
            request["LocalPath"] = self.container_local_output_path
        if self.hook_parameters is not None:
            request["HookParameters"] = self.hook_parameters
        if self.collection_configs is not None:
            request["CollectionConfigurations"] = [c._to_request_dict() for c in self.collection_configs]
        return request


def _other_trials(paths: Sequence[str] | None) -> dict[str, str]:
    return {f"other_trial_{i}": p for i, p in enumerate(paths or [])}


class Rule:
    """A Debugger rule. Build it with :meth:`sagemaker` (built-in) or :meth:`custom`."""

    def __init__(
        self,
        name: str,
        image_uri: str,
        instance_type: str | None,
        container_local_output_path: str | None,
        s3_output_path: str | None,
        volume_size_in_gb: int | None,
        rule_parameters: dict[str, str],
        collections_to_save: Sequence[CollectionConfig],
        actions: Action | ActionList | None = None,
    ) -> None:
        self.name = name
        self.image_uri = image_uri
        self.instance_type = instance_type
        self.container_local_output_path = container_local_output_path
        self.s3_output_path = s3_output_path
        self.volume_size_in_gb = volume_size_in_gb
        self.rule_parameters = rule_parameters
        self.collection_configs = list(collections_to_save)
        self.actions = actions

    @classmethod
    def sagemaker(
        cls,
        base_config: Mapping[str, Any],
        name: str | None = None,
        container_local_output_path: str | None = None,
        s3_output_path: str | None = None,
        other_trials_s3_input_paths: Sequence[str] | None = None,
        rule_parameters: Mapping[str, str] | None = None,
        collections_to_save: Sequence[CollectionConfig] | None = None,
        actions: Action | ActionList | None = None,
        *,
        other_trials_s3_output_paths: Sequence[str] | None = None,
    ) -> Rule:
        """A built-in rule from ``rule_configs.<rule>()``; ``rule_parameters`` override its defaults."""
        if rule_parameters is not None and rule_parameters.get("rule_to_invoke") is not None:
            raise RuntimeError(
                "You cannot provide a 'rule_to_invoke' for SageMaker rules. "
                "Either remove the rule_to_invoke or use a custom rule."
            )
        if actions is not None and not is_valid_action_object(actions):
            raise RuntimeError("`actions` must be of type `Action` or `ActionList`!")
        params = _other_trials(other_trials_s3_input_paths or other_trials_s3_output_paths)
        params.update(base_config["DebugRuleConfiguration"].get("RuleParameters", {}))
        params.update(rule_parameters or {})
        base_collections = [
            CollectionConfig(c.get("CollectionName", ""), c.get("CollectionParameters", {}))
            for c in base_config.get("CollectionConfigurations", [])
        ]
        return cls(
            name=name or base_config["DebugRuleConfiguration"]["RuleConfigurationName"],
            image_uri=DEFAULT_RULE_EVALUATOR_IMAGE,
            instance_type=None,
            container_local_output_path=container_local_output_path,
            s3_output_path=s3_output_path,
            volume_size_in_gb=None,
            rule_parameters=params,
            collections_to_save=collections_to_save or base_collections,
            actions=actions,
        )

    @classmethod
    def custom(
        cls,
        name: str,
        image_uri: str | None = None,
        instance_type: str | None = "ml.t3.medium",
        volume_size_in_gb: int | None = 30,
        source: str | None = None,
        rule_to_invoke: str | None = None,
        container_local_output_path: str | None = None,
        s3_output_path: str | None = None,
        other_trials_s3_input_paths: Sequence[str] | None = None,
        rule_parameters: Mapping[str, str] | None = None,
        collections_to_save: Sequence[CollectionConfig] | None = None,
        actions: Action | ActionList | None = None,
        *,
        other_trials_s3_output_paths: Sequence[str] | None = None,
    ) -> Rule:
        """Your own rule class ``rule_to_invoke`` in ``source`` (a local file, uploaded at ``fit()``,
        or an ``s3://`` URI). ``image_uri`` defaults to the region's
        ``sagemaker-debugger-rule-evaluator`` image (the SDK requires it)."""
        if actions is not None and not is_valid_action_object(actions):
            raise RuntimeError("`actions` must be of type `Action` or `ActionList`!")
        if bool(source) ^ bool(rule_to_invoke):
            raise ValueError("If you provide a source, you must also provide a rule to invoke (and vice versa).")
        params = _other_trials(other_trials_s3_input_paths or other_trials_s3_output_paths)
        if source:
            params["source_s3_uri"] = source
        if rule_to_invoke:
            params["rule_to_invoke"] = rule_to_invoke
        params.update(rule_parameters or {})
        return cls(
            name=name,
            image_uri=image_uri or CUSTOM_RULE_EVALUATOR_IMAGE,
            instance_type=instance_type,
            container_local_output_path=container_local_output_path,
            s3_output_path=s3_output_path,
            volume_size_in_gb=volume_size_in_gb,
            rule_parameters=params,
            collections_to_save=collections_to_save or [],
            actions=actions,
        )

    def prepare_actions(self, training_job_name: str) -> None:
        """Put the actions into ``RuleParameters["action_json"]`` (StopTraining gets the job's name)."""
        if self.actions is None:
            self.rule_parameters.pop("action_json", None)
            return
        self.actions.update_training_job_prefix_if_not_specified(training_job_name)
        self.rule_parameters["action_json"] = self.actions.serialize()

    def to_debugger_rule_config_dict(self) -> dict[str, Any]:
        request: dict[str, Any] = {"RuleConfigurationName": self.name, "RuleEvaluatorImage": self.image_uri}
        for key, value in (
            ("InstanceType", self.instance_type),
            ("VolumeSizeInGB", self.volume_size_in_gb),
            ("LocalPath", self.container_local_output_path),
            ("S3OutputPath", self.s3_output_path),
            ("RuleParameters", self.rule_parameters),
        ):
            if value:
                request[key] = value
        return request
