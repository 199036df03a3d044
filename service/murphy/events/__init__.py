"""Events: "SageMaker Training Job State Change" envelopes, EventBridge patterns, delivery.

Service side: :class:`EventBus` (subscriptions, the dispatcher, in-process callbacks) over the
job store's outbox. Client side: :func:`subscribe` (the server's event stream). Names are
exported lazily so that ``murphy.events.client`` works with only the standard library: importing
this package imports neither the store (SQLAlchemy) nor boto3.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "EventBus": "murphy.events.bus",
    "Subscription": "murphy.store.base",
    "DeadLetter": "murphy.store.base",
    "validate_pattern": "murphy.events.patterns",
    "matches": "murphy.events.patterns",
    "sign": "murphy.events.webhook",
    "verify_signature": "murphy.events.webhook",
    "envelope": "murphy.events.envelope",
    "subscribe": "murphy.events.client",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'murphy.events' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
