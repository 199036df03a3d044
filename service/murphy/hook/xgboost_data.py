"""Data files for XGBoost: SageMaker's content types, CSV (label first, no header) and libsvm
files or directories of them, loaded into an ``xgboost.DMatrix``.

Used by the hook's ``train_data=`` / ``validation_data=`` ``(path, content_type)`` tuples and by
the built-in algorithm (``murphy.algorithms.xgboost``). Messages follow SageMaker's XGBoost
container (``sagemaker_xgboost_container/data_utils.py``), which smdebug copied. Also the
booster helpers the hook needs (feature names, one round's tree dumps).
"""

from __future__ import annotations

import csv
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import xgboost

from murphy.exceptions import HookError

CSV = "csv"
LIBSVM = "libsvm"
_CSV_TYPES = ("csv", "text/csv")
_LIBSVM_TYPES = ("libsvm", "text/libsvm", "text/x-libsvm")


class DataError(ValueError):
    """A data file or content type XGBoost cannot train on; the message says which and why."""


def content_type(value: str | None) -> str:
    """``csv`` or ``libsvm`` from a ContentType (None means libsvm, SageMaker's default).

    A ``;``-separated parameter (``text/csv; label_size=1``) is ignored.
    """
    if value is None:
        return LIBSVM
    base = value.split(";")[0].strip().lower()
    if base in _LIBSVM_TYPES:
        return LIBSVM
    if base in _CSV_TYPES:
        return CSV
    raise DataError(
        f"{value} is not an accepted ContentType: 'csv', 'libsvm', 'text/csv', 'text/libsvm', 'text/x-libsvm'."
    )


def data_files(path: str | os.PathLike[str]) -> list[Path]:
    """The data files of a channel: the file itself, or the visible files under a directory.

    Hidden files (``.``/``_`` prefixes, e.g. ``_SUCCESS``) and xgboost cache files are skipped.
    """
    p = Path(path)
    if p.is_file():
        return [p]
    if not p.is_dir():
        raise DataError(f"{p} is not a valid path!")
    out = [
        f
        for f in sorted(p.rglob("*"))
        if f.is_file() and not f.name.startswith((".", "_")) and ".cache" not in f.name
    ]
    if not out:
        raise DataError(f"{p} contains no data files")
    return out


def _first_line(path: Path) -> str:
    with path.open("r", encoding="utf-8", errors="replace") as f:
        for line in f:
            if line.strip():
                return line.rstrip("\n")
    return ""


def _wrong_format(line: str, path: Path, kind: str) -> DataError:
    return DataError(
        f"First line '{line[:50]}...' of file '{path.name}' is not '{kind}' format. "
        f"Please ensure the file is in '{kind}' format."
    )


def _looks_like_libsvm(line: str) -> bool:
    parts = line.split()
    return len(parts) > 1 and all(":" in p for p in parts[1:])


def _delimiter(line: str, path: Path) -> str:
    try:
        return csv.Sniffer().sniff(line, delimiters=",;\t| ").delimiter
    except csv.Error as e:
        raise DataError(f"Could not determine delimiter on line {line[:50]} of file '{path.name}': {e}") from None


def load_csv(paths: list[Path]) -> tuple[np.ndarray, np.ndarray]:
    """Features and labels of CSV files: label in the first column, no header."""
    blocks: list[np.ndarray] = []
    for path in paths:
        line = _first_line(path)
        if not line:
            continue
        if _looks_like_libsvm(line):
            raise _wrong_format(line, path, "CSV")
        delim = _delimiter(line, path)
        try:
            block = np.loadtxt(path, delimiter=delim, dtype=np.float32, ndmin=2)
        except ValueError as e:
            raise DataError(f"Failed to load csv data from '{path.name}': {e}") from None
        blocks.append(block)
    if not blocks:
        raise DataError("Got input data without labels. Please check the input data set.")
    widths = {b.shape[1] for b in blocks}
    if len(widths) != 1:
        raise DataError(f"CSV files have different numbers of columns: {sorted(widths)}")
    data = np.concatenate(blocks)
    if data.shape[1] < 2:
        raise DataError("CSV data needs a label column and at least one feature column")
    return data[:, 1:], data[:, 0]


def _check_libsvm(paths: list[Path]) -> None:
    for path in paths:
        line = _first_line(path)
        if not line:
            continue
        label = line.split()[0]
        try:
            [float(x) for x in label.split(":")]
        except ValueError:
            raise _wrong_format(line, path, "LIBSVM") from None
        if len(line.split()) > 1 and not _looks_like_libsvm(line):
            raise _wrong_format(line, path, "LIBSVM")


def load_dmatrix(
    path: str | os.PathLike[str], ctype: str | None, feature_names: list[str] | None = None
) -> xgboost.DMatrix:
    """A DMatrix from a channel's file or directory in ``ctype`` (see :func:`content_type`)."""
    kind = content_type(ctype)
    paths = data_files(path)
    if kind == CSV:
        x, y = load_csv(paths)
        return xgboost.DMatrix(x, label=y, feature_names=feature_names)
    _check_libsvm(paths)
    if len(paths) == 1:
        try:
            return xgboost.DMatrix(f"{paths[0]}?format=libsvm")
        except xgboost.core.XGBoostError as e:
            raise DataError(f"Failed to load libsvm data with exception:\n{e}") from None
    return _libsvm_many(paths)


def _libsvm_many(paths: list[Path]) -> xgboost.DMatrix:
    # xgboost reads one libsvm file per URI: concatenate the rows of every file.
    rows: list[dict[int, float]] = []
    labels: list[float] = []
    for path in paths:
        with path.open("r", encoding="utf-8") as f:
            for line in f:
                parts = line.split()
                if not parts:
                    continue
                labels.append(float(parts[0].split(":")[0]))
                rows.append({int(k): float(v) for k, v in (p.split(":", 1) for p in parts[1:])})
    width = 1 + max((max(r) for r in rows if r), default=-1)
    dense = np.full((len(rows), width), np.nan, dtype=np.float32)
    for i, r in enumerate(rows):
        for k, v in r.items():
            dense[i, k] = v
    return xgboost.DMatrix(dense, label=np.array(labels, dtype=np.float32), missing=np.nan)


DataArg = xgboost.DMatrix | tuple[str, str] | None


def rank_world() -> tuple[int, int]:
    """This process's rank and the world size of xgboost's communicator (0, 1 without one)."""
    try:
        return int(xgboost.collective.get_rank()), int(xgboost.collective.get_world_size())
    except Exception:  # no communicator: a single process
        return 0, 1


def hook_data(value: DataArg, what: str) -> xgboost.DMatrix | None:
    """The hook's ``train_data=`` / ``validation_data=``: a DMatrix, or a local file's
    ``(path, content type)`` loaded into one; :class:`HookError` with smdebug's message else."""
    if value is None or isinstance(value, xgboost.DMatrix):
        return value
    if not (isinstance(value, tuple) and len(value) == 2 and all(isinstance(v, str) for v in value)):
        raise HookError(
            f"{what} must be a tuple of strings representing (file path, content type) or an xgboost.DMatrix instance."
        )
    path = os.path.expanduser(value[0])
    if not os.path.isfile(path):
        raise HookError(f"{what}: only local files are currently supported for SHAP, got {value[0]!r}")
    try:
        return load_dmatrix(path, value[1])
    except DataError as e:
        raise HookError(f"{what}: {e}") from e


def feature_names(model: xgboost.Booster) -> list[str]:
    """The booster's feature names (``f<i>`` when it has none), as SHAP columns are named."""
    names = model.feature_names
    return list(names) if names else [f"f{i}" for i in range(model.num_features())]


def round_dumps(model: xgboost.Booster, epoch: int) -> tuple[Sequence[str], int]:
    """The text dumps of round ``epoch``'s trees and the index of the first one."""
    try:
        dumps = model[epoch : epoch + 1].get_dump(with_stats=True)
        return dumps, epoch * len(dumps)
    except (xgboost.core.XGBoostError, IndexError, ValueError):
        # Slicing is not supported by every model: fall back to the whole dump.
        everything = model.get_dump(with_stats=True)
        rounds = max(1, model.num_boosted_rounds())
        per_round = max(1, len(everything) // rounds)
        return everything[epoch * per_round : (epoch + 1) * per_round], epoch * per_round
