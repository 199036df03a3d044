"""Where a hook writes: its ``out_dir`` resolved (SageMaker's default, the process runtime's
``/opt/ml`` fallback) and refused when it is a finished run's output."""

from __future__ import annotations

import os
from typing import Any

from murphy.exceptions import HookError, SMDebugRuntimeError, StorageError
from murphy.hook.config import DEFAULT_LOCAL_PATH
from murphy.storage import ObjectStore
from murphy.tensorio.locations import END_OF_TRAINING_KEY


class OutDirAlreadyEnded(HookError, SMDebugRuntimeError):
    """``out_dir`` holds ``training_job_end.ts``: it belongs to a finished run."""


def resolve_out_dir(out_dir: str | os.PathLike[str] | ObjectStore | None) -> Any:
    """The hook's out_dir: SageMaker's default inside a training job, /opt/ml relocated."""
    if out_dir is None:
        if "TRAINING_JOB_NAME" in os.environ:
            return _relocate_opt_ml(DEFAULT_LOCAL_PATH)
        raise HookError("out_dir is required outside SageMaker (or use Hook.create_from_json_file())")
    # A string first: the runtime Protocol check below walks the protocol's members.
    if type(out_dir) is not str and isinstance(out_dir, ObjectStore):
        return out_dir
    return _relocate_opt_ml(os.fspath(out_dir))


# murphy's process runtime gives each job its own /opt/ml elsewhere on the host. Its programs run
# in a private mount namespace where that directory *is* /opt/ml (murphy.container.namespace; then
# MURPHY_OPT_ML is /opt/ml and nothing is rewritten). Only where the host cannot make one (the
# documented fallback) is MURPHY_OPT_ML the directory's real path: a script that hard-codes
# SageMaker's /opt/ml/... out_dir (the article's does) must then write there, where the toolkit
# mirrors it from.
_OPT_ML = "/opt/ml"
_OPT_ML_ENV = "MURPHY_OPT_ML"


def _relocate_opt_ml(path: str) -> str:
    root = os.environ.get(_OPT_ML_ENV)
    if not root or root == _OPT_ML or "://" in path:
        return path
    if path == _OPT_ML or path.startswith(_OPT_ML + "/"):
        return root.rstrip("/") + path[len(_OPT_ML):]
    return path


def refuse_ended(store: ObjectStore) -> None:
    """Raise :class:`OutDirAlreadyEnded` when ``store`` is a finished run's output (as smdebug)."""
    try:
        ended = store.exists(END_OF_TRAINING_KEY)
    except StorageError:
        # An unreachable store must not stop construction; the writer will report it.
        return
    if ended:
        raise OutDirAlreadyEnded(
            f"{store.uri} already holds {END_OF_TRAINING_KEY}: it is the output of a finished "
            "run. Use a new out_dir (or delete the directory) for a new run."
        )
