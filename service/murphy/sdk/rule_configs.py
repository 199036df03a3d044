"""``rule_configs``: the built-in rule configs (``exploding_tensor()`` ...) and rule actions.

The rule functions are :mod:`murphy.rules.rule_configs`' (smdebug-rulesconfig's catalog). The
action classes serialise to ``RuleParameters["action_json"]`` exactly like smdebug-rulesconfig
1.0.1 does, quotes escaped with a backslash (``[{\\"name\\": \\"stoptraining\\", ...}]``), because
that is what the stock SageMaker SDK sends and what a rule container must therefore accept.
"""

from __future__ import annotations

import re

from murphy.rules.rule_configs import (
    DEEP_LEARNING_APPLICATION_RULES,
    DEEP_LEARNING_RULES,
    RULE_GROUPS,
    RULE_NAMES,
    UNIVERSAL_RULES,
    XGBOOST_RULES,
    all_zero,
    check_input_images,
    class_imbalance,
    confusion,
    create_xgboost_report,
    dead_relu,
    exploding_tensor,
    feature_importance_overweight,
    get_rule_config,
    get_rule_groups,
    loss_not_decreasing,
    nlp_sequence_ratio,
    overfit,
    overtraining,
    poor_weight_initialization,
    saturated_activation,
    similar_across_runs,
    stalled_training_rule,
    tensor_variance,
    tree_depth,
    unchanged_tensor,
    vanishing_gradient,
    weight_update_ratio,
)

__all__ = [
    "DEEP_LEARNING_APPLICATION_RULES",
    "DEEP_LEARNING_RULES",
    "RULE_GROUPS",
    "RULE_NAMES",
    "SMS",
    "UNIVERSAL_RULES",
    "XGBOOST_RULES",
    "Action",
    "ActionList",
    "Email",
    "StopTraining",
    "all_zero",
    "check_input_images",
    "class_imbalance",
    "confusion",
    "create_xgboost_report",
    "dead_relu",
    "exploding_tensor",
    "feature_importance_overweight",
    "get_rule_config",
    "get_rule_groups",
    "is_valid_action_object",
    "loss_not_decreasing",
    "nlp_sequence_ratio",
    "overfit",
    "overtraining",
    "poor_weight_initialization",
    "saturated_activation",
    "similar_across_runs",
    "stalled_training_rule",
    "tensor_variance",
    "tree_depth",
    "unchanged_tensor",
    "vanishing_gradient",
    "weight_update_ratio",
]

# smdebug-rulesconfig's job prefix pattern. Its email (``^[a-z0-9]+@\w+[.]\w{2,3}$``) and phone
# (exactly 10 digits) patterns reject ordinary addresses and numbers; these accept them and still
# keep quotes and backslashes out, which would break the serialised JSON.
_JOB_PREFIX = re.compile(r"^[A-Za-z0-9\-]+$")
_EMAIL = re.compile(r'^[^@\s"\\]+@[^@\s"\\]+\.[^@\s"\\]+$')
_PHONE = re.compile(r"^\+\d{10,15}$")


class Action:
    """One action run when a rule fires; not used directly (see the subclasses)."""

    def __init__(self, **action_parameters: str | None) -> None:
        # Same key order as smdebug-rulesconfig: the given parameters, then "name".
        params = dict(action_parameters)
        params["name"] = type(self).__name__.lower()
        self.action_parameters: dict[str, str] = {k: v for k, v in params.items() if v is not None}

    def update_training_job_prefix_if_not_specified(self, training_job_name: str) -> None:
        """Only :class:`StopTraining` names a job."""

    def serialize(self) -> str:
        """The action as smdebug-rulesconfig writes it: ``{\\"key\\": \\"value\\", ...}``."""
        return "{" + ", ".join(f'\\"{k}\\": \\"{v}\\"' for k, v in self.action_parameters.items()) + "}"


class StopTraining(Action):
    """Stop the training job when the rule fires. Without a prefix, ``fit()`` fills in the job's name."""

    def __init__(self, training_job_prefix: str | None = None) -> None:
        self.use_default_training_job_prefix = training_job_prefix is None
        if training_job_prefix is not None and (
            not isinstance(training_job_prefix, str) or not _JOB_PREFIX.match(training_job_prefix)
        ):
            raise ValueError(f"training_job_prefix must match [A-Za-z0-9-]+, got {training_job_prefix!r}")
        super().__init__(training_job_prefix=training_job_prefix)

    def update_training_job_prefix_if_not_specified(self, training_job_name: str) -> None:
        if self.use_default_training_job_prefix:
            self.action_parameters["training_job_prefix"] = training_job_name


class Email(Action):
    """Send an email to ``email_address`` when the rule fires (recorded by murphy for delivery)."""

    def __init__(self, email_address: str) -> None:
        if not isinstance(email_address, str) or not _EMAIL.match(email_address):
            raise ValueError(f"email_address must be an email address, got {email_address!r}")
        super().__init__(endpoint=email_address)


class SMS(Action):
    """Send an SMS to ``phone_number`` (``+`` and 10-15 digits) when the rule fires."""

    def __init__(self, phone_number: str) -> None:
        if not isinstance(phone_number, str) or not _PHONE.match(phone_number):
            raise ValueError(f"phone_number must be '+' and 10-15 digits, got {phone_number!r}")
        super().__init__(endpoint=phone_number)


class ActionList:
    """Several actions for one rule."""

    def __init__(self, *actions: Action) -> None:
        if not all(isinstance(a, Action) for a in actions):
            raise TypeError("actions must be list of Action objects!")
        self.actions = actions

    def update_training_job_prefix_if_not_specified(self, training_job_name: str) -> None:
        for action in self.actions:
            if isinstance(action, StopTraining):
                action.update_training_job_prefix_if_not_specified(training_job_name)

    def serialize(self) -> str:
        return "[" + ", ".join(a.serialize() for a in self.actions) + "]"


def is_valid_action_object(actions: object) -> bool:
    return isinstance(actions, (Action, ActionList))
