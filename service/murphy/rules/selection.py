"""Which tensors a rule looks at: smdebug's ``collection_names`` / ``tensor_regex`` parameters.

When both are given the rule inspects their union; when neither is given, every tensor.
"""

from __future__ import annotations

import re
from typing import Any

from murphy.tensorio.locations import REDUCTIONS_PREFIX


def select_tensor_names(
    trial: Any,
    collection_names: list[str] | None = None,
    tensor_regex: list[str] | None = None,
    *,
    step: int | None = None,
) -> list[str]:
    """Tensor names of ``trial`` selected by collections and/or regexes (sorted, no duplicates).

    With ``step``, only tensors saved at that (global) step.
    """
    kwargs: dict[str, Any] = {} if step is None else {"step": step}
    if not collection_names and not tensor_regex:
        names = set(trial.tensor_names(**kwargs))
    else:
        names = set()
        for c in collection_names or []:
            names.update(trial.tensor_names(collection=c, **kwargs))
        if tensor_regex:
            names.update(trial.tensor_names(regex=list(tensor_regex), **kwargs))
    return sorted(n for n in names if not n.startswith(REDUCTIONS_PREFIX))


def matches_any(name: str, regexes: list[str]) -> bool:
    return any(re.search(r, name) for r in regexes)
