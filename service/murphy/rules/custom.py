"""Loading a custom rule: fetch its ``.py`` source (``source_s3_uri``), import it, find the class.

The source is fetched through :mod:`murphy.storage` (a local path, ``file://``, ``s3://`` or
``memory://``) and executed as a fresh module. The caller wraps this in
:func:`murphy.rules.shim.smdebug_shim` so ``from smdebug.rules.rule import Rule`` resolves.
"""

from __future__ import annotations

import hashlib
import inspect
import os
import sys
import types
from typing import Any

from murphy.exceptions import MurphyError
from murphy.rules.params import RuleParameterError
from murphy.storage import open_store


class CustomRuleError(RuleParameterError):
    """The custom rule source cannot be fetched, imported, or has no such rule class."""


def fetch_source(uri: str) -> str:
    """The text of the rule file at ``uri`` (path, ``file://``, ``s3://``, ``memory://``)."""
    if "://" not in uri or uri.startswith("file://"):
        path = uri[len("file://"):] if uri.startswith("file://") else uri
        try:
            with open(path, encoding="utf-8") as f:
                return f.read()
        except OSError as e:
            raise CustomRuleError(f"cannot read custom rule source {uri}: {e.strerror or e}") from None
    parent, _, name = uri.rstrip("/").rpartition("/")
    if not name or parent.endswith(":/"):
        raise CustomRuleError(f"custom rule source {uri} does not name a file")
    try:
        return open_store(parent).get(name).decode("utf-8")
    except (MurphyError, UnicodeDecodeError, OSError) as e:
        raise CustomRuleError(f"cannot read custom rule source {uri}: {e}") from None


def import_source(uri: str, text: str) -> types.ModuleType:
    """Execute ``text`` as a new module (registered in ``sys.modules`` under a unique name so
    pickling and dataclasses work)."""
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]
    name = f"murphy_custom_rule_{digest}"
    module = types.ModuleType(name)
    module.__file__ = uri
    sys.modules[name] = module
    try:
        code = compile(text, uri, "exec")
        exec(code, module.__dict__)
    except BaseException as e:
        sys.modules.pop(name, None)
        if isinstance(e, SyntaxError):
            where = f" (line {e.lineno})" if e.lineno else ""
            raise CustomRuleError(f"custom rule source {uri} does not compile: {e.msg}{where}") from None
        if isinstance(e, Exception):
            raise CustomRuleError(
                f"custom rule source {uri} failed to import: {type(e).__name__}: {e}"
            ) from None
        raise
    return module


def _rule_classes(module: types.ModuleType) -> dict[str, type]:
    return {
        n: c for n, c in vars(module).items()
        if inspect.isclass(c) and callable(getattr(c, "invoke_at_step", None)) and not inspect.isabstract(c)
    }


def find_rule_class(module: types.ModuleType, uri: str, class_name: str) -> type[Any]:
    """The class ``class_name`` of ``module`` (exact name, else a unique case-insensitive match)."""
    classes = _rule_classes(module)
    cls = classes.get(class_name)
    if cls is None:
        matches = [c for n, c in classes.items() if n.lower() == class_name.lower()]
        cls = matches[0] if len(matches) == 1 else None
    if cls is None:
        if inspect.isclass(getattr(module, class_name, None)):
            raise CustomRuleError(
                f"class {class_name} in custom rule source {uri} is not a rule "
                "(it needs an invoke_at_step method and must not be abstract)"
            )
        found = ", ".join(sorted(classes)) or "none"
        raise CustomRuleError(
            f"custom rule source {uri} defines no rule class {class_name!r} (rule classes found: {found})"
        )
    return cls


def load_custom_rule(uri: str, class_name: str) -> type[Any]:
    """Fetch, import and return the rule class (raises :class:`CustomRuleError`)."""
    text = fetch_source(os.fspath(uri))
    module = import_source(uri, text)
    return find_rule_class(module, uri, class_name)
