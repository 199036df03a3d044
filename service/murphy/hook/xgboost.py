"""The XGBoost adapter: smdebug's ``smdebug.xgboost.Hook`` as an ``xgboost.callback.TrainingCallback``.

This is the only hook module that imports xgboost (``xgboost_data`` loads data files and reads
boosters' tree dumps for it).
``xgboost.train(params, dtrain, evals=..., callbacks=[hook])``, ``xgboost.cv(..., callbacks=[hook])``
and ``XGBClassifier(callbacks=[hook])`` all work. Step = the 0-based boosting round, mode GLOBAL,
default save interval 10, default collection ``metrics``; names are smdebug's (see
``docs/xgboost.md``). Where smdebug was wrong murphy keeps the name and fixes the value:

* the booster type comes from the model's own config (smdebug read a ``Booster.booster``
  attribute that does not exist): gblinear models get no trees and no feature importance;
* the xgboost version is ``xgboost.__version__`` (smdebug asked pkg_resources for the
  distribution ``xgboost``, which the ``xgboost-cpu`` wheel is not);
* ``trees/*`` hold every tree of the current round (``num_class x num_parallel_tree`` trees),
  not the one tree whose index happens to equal the round;
* ``full_shap/<feature>`` holds that feature's SHAP values (one per row), not the whole matrix;
  feature names the SHAP regexes' character class would drop (``alpha``, ``bmi``) are added to
  the collection by name.

The hook never breaks training: every callback runs under the hook's error guard, and
``after_iteration`` always returns False (it never asks xgboost to stop).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import Any

import numpy as np
import xgboost

from murphy.core.collection import CollectionKeys
from murphy.core.modes import ModeKeys
from murphy.core.reduction_config import ReductionConfig
from murphy.core.save_config import SaveConfig
from murphy.hook.base import BaseHook
from murphy.hook.config import HookConfig, hook_from_config
from murphy.hook.guard import LOGGER_NAME
from murphy.hook.writer import BackgroundWriter
from murphy.hook.xgboost_data import DataArg, feature_names, hook_data, rank_world, round_dumps
from murphy.hook.xgboost_io import (
    InlineWriter,
    MetricPlan,
    XGBoostBackend,
    metric_plan,
    replay_metric_plan,
    xgboost_save_config,
)
from murphy.hook.xgboost_names import (
    DEFAULT_INCLUDE_COLLECTIONS,
    DEFAULT_SAVE_INTERVAL,
    IMPORTANCE_TYPES,
    INCREASING_METRICS_REGEX,
    TREE_BOOSTERS,
    XGBOOST_COLLECTION_REGEXES,
    as_array,
    booster_name,
    increasing_metric,
    metric_items,
    parse_tree_dump,
)
from murphy.storage import ObjectStore
from murphy.storage.local import LocalObjectStore

_log = logging.getLogger(LOGGER_NAME)
K = CollectionKeys
# Rounds that save only these (the default, ``metrics``) can replay the previous round's plan.
_METRIC_COLLECTIONS = frozenset({K.METRICS, K.LOSSES})
_NOTHING_DUE: frozenset[str] = frozenset()


class Hook(BaseHook, xgboost.callback.TrainingCallback):
    """smdebug's XGBoost hook: ``xgboost.train(params, dtrain, callbacks=[hook])``."""

    def __init__(
        self,
        out_dir: str | os.PathLike[str] | ObjectStore | None = None,
        export_tensorboard: bool = False,
        tensorboard_dir: str | None = None,
        dry_run: bool = False,
        reduction_config: ReductionConfig | None = None,
        save_config: SaveConfig | None = None,
        include_regex: list[str] | None = None,
        include_collections: list[str] | None = None,
        save_all: bool = False,
        include_workers: str = "one",
        hyperparameters: Mapping[str, Any] | None = None,
        train_data: DataArg = None,
        validation_data: DataArg = None,
        **kwargs: Any,
    ) -> None:
        rank, world = rank_world()
        self.train_data = hook_data(train_data, "train_data")
        self.validation_data = hook_data(validation_data, "validation_data")
        super().__init__(
            out_dir, dry_run, None, save_config or SaveConfig(save_interval=DEFAULT_SAVE_INTERVAL),
            include_regex, include_collections, save_all, include_workers,
            backend=XGBoostBackend(), rank=rank, world_size=world, collection_regexes=XGBOOST_COLLECTION_REGEXES,
            **kwargs,
        )
        xgboost.callback.TrainingCallback.__init__(self)
        # smdebug's XGBoost default is ``metrics`` (the base hook's is PyTorch's ``losses``).
        included = set(DEFAULT_INCLUDE_COLLECTIONS) | set(include_collections or ())
        if include_regex:
            included.add(K.DEFAULT)
        if save_all:
            included.add(K.ALL)
        self.collections.included = included
        self.collections.invalidate()
        if reduction_config is not None:
            _log.warning("murphy XGBoost hook: 'reduction_config' is not supported and will be ignored.")
        # After the writer is chosen: the TensorBoard sink hangs on it.
        self._setup_tensorboard(out_dir, export_tensorboard, tensorboard_dir)
        self.hyperparameters = dict(hyperparameters) if hyperparameters else None
        self.xgboost_version = xgboost.__version__
        self._warned: set[str] = set()
        self._claimed: set[str] = set()
        self._booster: tuple[Any, str | None] | None = None
        # (collections generation, next round at which anything is due) after a full round start.
        self._quiet_until: tuple[int, int] | None = None
        # (generation, due collections, metric names, (position, shape) per record written).
        self._metric_plan: MetricPlan | None = None
        # The round after a saved one, when it starts a quiet stretch (-1: none); see _arm_settle.
        self._settle_at = -1

    def _new_writer(self, max_pending: int, max_pending_bytes: int, max_block: float | None) -> BackgroundWriter:
        # A LocalObjectStore's uri is file://... (and costs a pathlib call to make: not asked).
        if type(self.store) is LocalObjectStore or not str(self.store.uri).startswith("s3://"):
            # A round saves a few small tensors; handing them to a thread costs more (waking it,
            # then GIL hand-offs while xgboost runs) than writing two local files here, which
            # is what smdebug does too. Remote stores keep the background writer.
            return InlineWriter(self.store, self.worker, self.backend, self.guard)
        return super()._new_writer(max_pending, max_pending_bytes, max_block)

    @classmethod
    def create_from_json_file(cls, json_file_path: str | os.PathLike[str] | None = None, **kwargs: Any) -> Hook:
        """A hook configured by ``debughookconfig.json`` (default path: see :class:`HookConfig`);
        ``kwargs`` (``hyperparameters``, ``train_data``, ...) go to the constructor."""
        return cls.from_config(HookConfig.load(json_file_path), **kwargs)

    @classmethod
    def from_config(cls, cfg: HookConfig, **kwargs: Any) -> Hook:
        """A hook configured by a parsed :class:`HookConfig` (save interval 10 unless set; no
        reductions, as smdebug's)."""
        return hook_from_config(cls, cfg, save_config_of=xgboost_save_config, reductions=False, **kwargs)

    # ---- xgboost callbacks -----------------------------------------------------------------

    def after_iteration(self, model: Any, epoch: int, evals_log: Any) -> bool:
        """Save what is due at round ``epoch``; never stops training (returns False)."""
        quiet = self._quiet
        if quiet and epoch == self.step + 1:
            # A round of a quiet stretch (set by _set_round; zeroed by anything that could
            # change it, see BaseHook._quiet): only the counters move.
            self._quiet = quiet - 1
            self.step = self._mode_step = epoch
            return False
        if epoch == self._settle_at:  # after a saved round: _set_round's quiet start, inline
            self._settle_at = -1
            until = self._quiet_until
            if (until is not None and epoch == self.step + 1 and self.collections.generation == until[0]
                    and not self._records and not self._pending_scalars
                    and (self._collections_written or not self._saved_any)
                    and not self.guard.disabled and not self._closed):
                self.step = self._mode_step = epoch
                if self._saving:
                    self._set_due(_NOTHING_DUE)
                self._quiet = until[1] - epoch - 1
                return False
        if not self.guard.disabled and not self._closed:
            self.guard.run("after_iteration", self._after_iteration, model, int(epoch), evals_log)
        return False

    def after_training(self, model: Any) -> Any:
        """Training is over: write the last files and (outside SageMaker) the end marker."""
        self.close()
        return model

    # ---- saving ----------------------------------------------------------------------------

    def _after_iteration(self, model: Any, epoch: int, evals_log: Mapping[str, Any]) -> None:
        self._set_round(epoch)
        if not self._saving:
            return
        due = self._due
        metrics_only = due <= _METRIC_COLLECTIONS
        if not (metrics_only and self._replay_metrics(evals_log or {}, due)):
            self._save_due(model, epoch, evals_log or {}, due, metrics_only)
        # Hand the round over now: the writer thread writes its files while the next round runs.
        self._end_step()
        # Unless the next round is due too, it starts a quiet stretch in after_iteration.
        until = self._quiet_until
        self._settle_at = epoch + 1 if until is not None and epoch + 1 < until[1] else -1

    def _save_due(self, model: Any, epoch: int, evals_log: Mapping[str, Any], due: frozenset[str],
                  metrics_only: bool) -> None:
        """Snapshot what ``due`` holds at round ``epoch`` (without a replayable metric plan)."""
        fresh = not self._records and not self._pending_scalars
        wide = K.ALL in due or K.DEFAULT in due

        def wanted(name: str) -> bool:
            return wide or name in due

        if wanted(K.HYPERPARAMETERS):
            self._write_hyperparameters()
        if wanted(K.METRICS) or wanted(K.LOSSES):
            # A metric is a loss unless it grows as the model improves; with ``metrics`` due
            # every metric is written (and lands in ``losses`` too through its regex).
            skip_increasing = not wanted(K.METRICS)
            for name, value in metric_items(evals_log):
                if not (skip_increasing and INCREASING_METRICS_REGEX.match(name)):
                    self._claim_metric(name)
                    self._put(name, value)
        model_due = any(wanted(c) for c in (K.PREDICTIONS, K.LABELS, K.FEATURE_IMPORTANCE, K.TREES, K.FULL_SHAP,
                                            K.AVERAGE_SHAP))
        kind = self._booster_kind(model) if model_due else None
        if model_due and kind is None:
            self._warn_once("cv", "model collections need a Booster (xgboost.cv gives none): only metrics and hyperparameters are saved")
        elif kind is not None:
            if wanted(K.PREDICTIONS) or wanted(K.LABELS):
                self._write_validation(model, wanted(K.PREDICTIONS), wanted(K.LABELS))
            if wanted(K.FEATURE_IMPORTANCE):
                self._write_importance(model, kind)
            if wanted(K.TREES):
                self._write_trees(model, kind, epoch)
            if wanted(K.FULL_SHAP) or wanted(K.AVERAGE_SHAP):
                self._write_shap(model, wanted(K.FULL_SHAP), wanted(K.AVERAGE_SHAP))
        if metrics_only and fresh:
            self._remember_metrics(evals_log, due)

    def _remember_metrics(self, evals_log: Mapping[str, Any], due: frozenset[str]) -> None:
        # Until the collections change, rounds with these due collections and metric names write
        # the same records (claims and tensor names are in place): _replay_metrics.
        plan = None if self._pending_scalars else metric_plan(
            self.collections.generation, due, evals_log, self._records)
        self._metric_plan = plan

    def _replay_metrics(self, evals_log: Mapping[str, Any], due: frozenset[str]) -> bool:
        plan = self._metric_plan
        if plan is None or self._records or self._pending_scalars:
            return False
        records = replay_metric_plan(plan, self.collections.generation, due, evals_log)
        if records is None:
            return False
        self._records = records
        return True

    def _set_round(self, epoch: int) -> None:
        """Make ``epoch`` the current global (and mode) step, whatever came before.

        A round before the next due one, right after the previous round, with unchanged
        collections, only moves the counters (the quiet path, as the PyTorch hook's).
        """
        quiet = self._quiet_until
        if (quiet is not None and epoch == self.step + 1 and epoch < quiet[1]
                and self.collections.generation == quiet[0] and not self._records and not self._pending_scalars):
            # The mode is GLOBAL (set by the full path): _mode_step is its counter (BaseHook).
            self.step = self._mode_step = epoch
            if self._saving:
                self._set_due(frozenset())
            if self._saved_any and not self._collections_written:
                # Readers wait for this file: as early as smdebug, at the round after the first save.
                self._export_collections()
            # The rounds up to the next due one take after_iteration's counters-only path.
            self._quiet = quiet[1] - epoch - 1
            return
        self.step = epoch - 1
        if self._step_mode is not ModeKeys.GLOBAL:
            # Otherwise _mode_step is GLOBAL's counter and shadows this entry (BaseHook.mode_steps).
            self._mode_steps[ModeKeys.GLOBAL] = epoch - 1
        self._mode_step = epoch - 1
        self._step_mode = self.mode = ModeKeys.GLOBAL
        self._quiet = 0
        self._next_due.clear()
        # (generation, next due round after this one), which _begin_full_step has just computed.
        self._quiet_until = self._begin_full_step()

    def _put(self, name: str, value: Any) -> None:
        if type(value) is float:  # a metric: saved as shape [1] (XGBoostBackend), no array here
            self._save(name, value)
            return
        try:
            arr = as_array(value)
        except TypeError as e:
            self._warn_once(name, f"{name} not saved: {e}")
            return
        if arr.size:
            self._save(name, arr)

    def _claim_metric(self, name: str) -> None:
        # smdebug's regexes need letters before the dash, so the scikit-learn API's
        # ``validation_0-logloss`` was never saved: such names join the collections by name.
        metrics = self.collections.collections[K.METRICS]
        if name in self._claimed or metrics.matches(name):
            return
        self._claimed.add(name)
        metrics.add_tensor_name(name)
        if not increasing_metric(name):
            self.collections.collections[K.LOSSES].add_tensor_name(name)
        self.collections.invalidate()

    def _warn_once(self, key: str, message: str) -> None:
        if key not in self._warned:
            self._warned.add(key)
            _log.warning("murphy XGBoost hook: %s", message)

    def _booster_kind(self, model: Any) -> str | None:
        """``gbtree``/``gblinear``/``dart`` for a Booster, None for anything else (cv's folds)."""
        cached = self._booster
        if cached is not None and cached[0] is model:
            return cached[1]
        kind = booster_name(model.save_config()) if isinstance(model, xgboost.Booster) else None
        self._booster = (model, kind)
        return kind

    def _write_hyperparameters(self) -> None:
        if not self.hyperparameters:
            self._warn_once("hp", "To log hyperparameters, 'hyperparameter' parameter must be provided.")
            return
        for key, value in self.hyperparameters.items():
            self._put(f"hyperparameters/{key}", value)

    def _write_validation(self, model: xgboost.Booster, predictions: bool, labels: bool) -> None:
        data = self.validation_data
        if data is None:
            self._warn_once("val", "To log predictions and labels, 'validation_data' parameter must be provided.")
            return
        if predictions:
            self._put("predictions", model.predict(data))
        if labels:
            self._put("labels", data.get_label())

    def _write_importance(self, model: xgboost.Booster, kind: str) -> None:
        if kind not in TREE_BOOSTERS:
            self._warn_once("fi", f"Feature importance is not defined for Booster type {kind}")
            return
        for itype in IMPORTANCE_TYPES:
            # Per-target lists (vector-leaf models) have no single normalised score.
            raw = model.get_score(importance_type=itype)
            scores = {f: float(v) for f, v in raw.items() if isinstance(v, int | float)}
            total = sum(scores.values())
            if total <= 0:
                continue
            for feature, score in scores.items():
                self._put(f"feature_importance/{itype}/{feature}", score / total)

    def _write_trees(self, model: xgboost.Booster, kind: str, epoch: int) -> None:
        if kind not in TREE_BOOSTERS:
            self._warn_once("trees", f"Tree model dump is not supported for Booster type {kind}")
            return
        dumps, first = round_dumps(model, epoch)
        if not dumps:
            return
        for column, values in parse_tree_dump(dumps, first).items():
            self._put(f"trees/{column}", values)

    def _write_shap(self, model: xgboost.Booster, full: bool, average: bool) -> None:
        if self.train_data is None:
            self._warn_once("shap", "To log SHAP values, 'train_data' parameter must be provided.")
            return
        shap = np.asarray(model.predict(self.train_data, pred_contribs=True))
        names = feature_names(model)
        mean = shap.mean(axis=tuple(range(shap.ndim - 1))) if average else None
        for j, feature in enumerate(names):
            for coll, value in ((K.FULL_SHAP, shap[..., j] if full else None), (K.AVERAGE_SHAP, mean)):
                if value is None:
                    continue
                name = f"{coll}/{feature}"
                # smdebug's ``[^/bias]$`` drops every name ending in / b i a s; only the bias
                # column was meant: give the others to the collection by name.
                self.collections.collections[coll].add_tensor_name(name)
                self._put(name, value if coll == K.FULL_SHAP else value[j])


_HOOK: Hook | None = None


def get_hook(json_config_path: str | os.PathLike[str] | None = None, create_if_not_exists: bool = True) -> Hook | None:
    """The process-wide hook, built from ``debughookconfig.json`` when that file exists (smdebug's
    ``smdebug.xgboost.get_hook``); None when there is no config."""
    global _HOOK
    if _HOOK is None and create_if_not_exists:
        path = json_config_path if json_config_path is not None else HookConfig.default_path()
        if os.path.exists(path):
            _HOOK = Hook.create_from_json_file(path)
    return _HOOK


def set_hook(hook: Hook | None) -> None:
    """Replace the process-wide hook."""
    global _HOOK
    _HOOK = hook
