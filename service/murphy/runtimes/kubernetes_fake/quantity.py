"""Kubernetes resource quantities (``500m``, ``3.5``, ``13Gi``, ``1e3``) as numbers."""

from __future__ import annotations

import re
from fractions import Fraction

_SUFFIX: dict[str, Fraction | int] = {"": 1, "n": Fraction(1, 10**9), "u": Fraction(1, 10**6), "m": Fraction(1, 1000), "k": 10**3, "M": 10**6,
           "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40,
           "Pi": 2**50, "Ei": 2**60}
_Q = re.compile(r"^([+-]?[0-9.]+)([eE][+-]?[0-9]+)?(n|u|m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?$")


def parse_quantity(text: str) -> Fraction:
    m = _Q.match(str(text).strip())
    if not m:
        raise ValueError(f"quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$': {text!r}")
    value = Fraction(m.group(1))
    if m.group(2):
        value *= Fraction(10) ** int(m.group(2)[1:])
    return value * _SUFFIX[m.group(3) or ""]


def pod_requests(pod: dict[str, object]) -> dict[str, Fraction]:
    """What a pod asks of a node: each resource's requests (limits where no request, as the
    API server defaults), the max of init containers against the sum of the others."""
    spec = pod.get("spec") or {}
    assert isinstance(spec, dict)

    def of(c: dict[str, object]) -> dict[str, Fraction]:
        res = c.get("resources") or {}
        assert isinstance(res, dict)
        merged = {**(res.get("limits") or {}), **(res.get("requests") or {})}
        return {k: parse_quantity(str(v)) for k, v in merged.items()}

    total: dict[str, Fraction] = {}
    for c in spec.get("containers") or []:
        for k, v in of(c).items():
            total[k] = total.get(k, Fraction(0)) + v
    for c in spec.get("initContainers") or []:
        for k, v in of(c).items():
            total[k] = max(total.get(k, Fraction(0)), v)
    return total
