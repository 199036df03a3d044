"""smdebug's ``KerasHook`` for Keras 3 (what ``tf.keras`` is on TensorFlow 2.21): a callback.

Each train/test/predict batch is one step (TRAIN, EVAL, PREDICT; the first batch is step 0). At a
saving step, at the batch's end:

* ``logs`` keys: ``loss`` (and ``val_loss``) in ``losses``, every other key in ``metrics``.
  Keras 3 passes the *running mean since the epoch began*, not the batch's own loss;
* every layer's weights as ``<layer.name>/weights/<variable.path>:0`` (``dense/weights/dense/kernel:0``)
  in ``biases`` when the name contains ``bias``, else ``weights``: the values after the update;
* the optimizer's variables as ``<variable.path>:0`` in ``optimizer_variables`` (TRAIN only);
* opt-in, :meth:`KerasHook.wrap_optimizer`: gradients as ``gradients/<variable.path>Grad``. For
  the saving TRAIN batches only, the callback swaps in a second train function that Keras built
  from the same ``train_step`` (same ``jit_compile``, ``run_eagerly``) and whose trace copies
  every gradient into a fixed-shape shadow variable (plain assigns: XLA-safe); it reads the
  shadows at the batch's end and swaps Keras' own function back. Every other batch runs Keras'
  own train function, traced without any copy;
* opt-in, :meth:`KerasHook.save_layer_outputs`: layer outputs as ``<layer.name>/outputs`` in
  ``outputs`` and ``layers``, returned by the train step itself (``model.train_step`` of that
  instance) and taken out of ``logs`` again before any other callback sees them.

:meth:`KerasHook.wrap_tape` covers custom ``tf.GradientTape`` loops (``tensorflow_tape``).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import Any

import keras
import tensorflow as tf

from murphy.core.collection import CollectionKeys
from murphy.core.modes import ModeKeys
from murphy.core.reduction_config import ReductionConfig
from murphy.core.save_config import SaveConfig
from murphy.hook.base import BaseHook
from murphy.hook.config import HookConfig, hook_from_config
from murphy.hook.guard import LOGGER_NAME, guarded
from murphy.hook.tensorflow_common import (
    BIAS_PATTERN,
    TF_COLLECTION_REGEXES,
    TF_DEFAULT_INCLUDE,
    TFNumpyBackend,
    env_rank_world,
)
from murphy.hook.tensorflow_tape import TapeProxy
from murphy.storage import ObjectStore

_log = logging.getLogger(LOGGER_NAME)
LOSS_KEYS = frozenset({"loss", "val_loss"})
# Keys the layer-output train step adds to logs; the hook removes them.
LAYER_OUTPUT_PREFIX = "__murphy_layer_output__/"


def _var_path(v: Any) -> str:
    return str(getattr(v, "path", None) or v.name)


def _tf_variable(value: Any) -> Any:
    """The ``tf.Variable`` behind ``value`` (itself, or a Keras 3 variable's), else None."""
    if isinstance(value, tf.Variable):
        return value
    if isinstance(value, keras.Variable):
        inner = value.value
        return inner if isinstance(inner, tf.Variable) else None
    return None


def _take_layer_outputs(logs: Any) -> dict[str, Any] | None:
    """Remove the layer outputs the train step added to ``logs``, saving or not (the progress
    bar and History, which run after user callbacks, must never see them); return them."""
    if not isinstance(logs, dict):
        return None
    keys = [k for k in logs if isinstance(k, str) and k.startswith(LAYER_OUTPUT_PREFIX)]
    return {k[len(LAYER_OUTPUT_PREFIX):]: logs.pop(k) for k in keys} if keys else None


class KerasHook(keras.callbacks.Callback, BaseHook):  # type: ignore[misc]
    """smdebug's ``smdebug.tensorflow.KerasHook``: ``model.fit(..., callbacks=[hook])``."""

    _reduction_keeps_output_index = True

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
        **kwargs: Any,
    ) -> None:
        keras.callbacks.Callback.__init__(self)
        rank, world = env_rank_world()
        BaseHook.__init__(
            self, out_dir, dry_run, reduction_config, save_config, include_regex, include_collections,
            save_all, include_workers, backend=TFNumpyBackend(), rank=rank, world_size=world,
            collection_regexes=TF_COLLECTION_REGEXES, **kwargs,
        )
        self._setup_tensorboard(out_dir, export_tensorboard, tensorboard_dir)
        self.collections.include(TF_DEFAULT_INCLUDE)
        self._optimizers: list[Any] = []
        # id(variable) -> (variable, its shadow gradient variable, export name)
        self._shadows: dict[int, tuple[Any, Any, str]] = {}
        self._grads_written = False
        # True while the capture train function runs: a trace of the wrapped optimizer's apply
        # made then copies the gradients, any other trace (Keras' own function) does not.
        self._tracing_capture = False
        # (Keras' train function, the capture function built beside it) (see _swap_in_capture).
        self._capture_fn: tuple[Any, Any] | None = None
        # Keras' own train function while the capture function stands in for it (one batch).
        self._swapped: Any = None
        # id(tf variables) -> a tf.function reading them all in one call (see _read_values).
        self._readers: dict[tuple[int, ...], Any] = {}

    @classmethod
    def create_from_json_file(cls, json_file_path: str | os.PathLike[str] | None = None) -> KerasHook:
        """A hook configured by ``debughookconfig.json`` (default path: see :class:`HookConfig`)."""
        return hook_from_config(cls, HookConfig.load(json_file_path))

    # ---- opt-in capture --------------------------------------------------------------------

    def wrap_optimizer(self, optimizer: Any) -> Any:
        """Save the gradients *this* optimizer instance applies; returns the same optimizer.

        The instance's ``apply`` (which ``apply_gradients`` and Keras' train step end in) copies
        each gradient into a shadow variable of the same shape, in the train function the hook
        runs for saving TRAIN batches only (see :meth:`_swap_in_capture`). Call it before ``fit``.
        """
        if not hasattr(optimizer, "apply"):
            _log.warning("murphy hook: wrap_optimizer needs a Keras 3 optimizer, got %s; gradients "
                         "will not be saved", type(optimizer).__name__)
            return optimizer
        original = optimizer.apply

        def apply(grads: Any, trainable_variables: Any = None) -> Any:
            grads = list(grads)
            variables = list(trainable_variables) if trainable_variables is not None else None
            # Decided when traced (or, run eagerly, when called): only the capture function's
            # trace holds the copies, so Keras' own function runs no extra op at all (a tf.cond
            # on a flag variable cost ~1 % of a small CNN's step, every batch).
            if self._tracing_capture and variables is not None:
                for grad, var in zip(grads, variables, strict=False):
                    hit = self._shadows.get(id(var))
                    if hit is not None and grad is not None and not isinstance(grad, tf.IndexedSlices):
                        hit[1].assign(tf.cast(grad, hit[1].dtype))
                        self._grads_written = True
            return original(grads, variables)

        optimizer.apply = apply
        self._optimizers.append(optimizer)
        self.get_collection(CollectionKeys.GRADIENTS)
        return optimizer

    def save_layer_outputs(self, model: Any, layers: list[Any] | None = None) -> Any:
        """Save layer outputs (``<layer>/outputs``) of ``model``'s training batches; returns it.

        Replaces *this* model instance's ``train_step`` and its layers' ``call``: each layer's
        output of the step's own forward pass is returned by the train step (XLA-safe: nothing
        is assigned), and the callback takes it out of ``logs``. Call it before ``fit``.
        """
        chosen = list(layers if layers is not None else model.layers)
        stash: dict[str, Any] = {}
        for layer in chosen:
            layer.call = self._stashing_call(layer, stash)
        original = model.train_step

        def train_step(data: Any) -> Any:
            stash.clear()
            logs = original(data)
            if isinstance(logs, dict):
                logs = dict(logs)
                for name, value in stash.items():
                    logs[LAYER_OUTPUT_PREFIX + name] = value
            return logs

        model.train_step = train_step
        self.get_collection(CollectionKeys.OUTPUTS)
        self.get_collection(CollectionKeys.LAYERS)
        return model

    @staticmethod
    def _stashing_call(layer: Any, stash: dict[str, Any]) -> Callable[..., Any]:
        call = layer.call

        def stashing(*args: Any, **kwargs: Any) -> Any:
            out = call(*args, **kwargs)
            if tf.is_tensor(out):
                stash[f"{layer.name}/outputs"] = out
            return out

        return stashing

    def wrap_tape(self, tape: Any) -> TapeProxy:
        """A proxy of ``tape`` that saves a step per ``with`` block (see ``tensorflow_tape``)."""
        return TapeProxy(self, tape)

    # ---- Keras callbacks -------------------------------------------------------------------

    def on_train_begin(self, logs: Any = None) -> None:
        self.guard.run("on_train_begin", self._make_shadows)

    def _make_shadows(self) -> None:
        if not self._optimizers or self.model is None:
            return
        for var in self.model.trainable_variables:
            if id(var) not in self._shadows:
                shadow = tf.Variable(tf.zeros(var.shape, dtype=var.dtype), trainable=False,
                                     name="murphy_grad_shadow")
                name = f"gradients/{_var_path(var)}Grad"
                self._shadows[id(var)] = (var, shadow, name)

    def on_train_batch_begin(self, batch: int, logs: Any = None) -> None:
        self._batch_begin(ModeKeys.TRAIN)

    def on_test_batch_begin(self, batch: int, logs: Any = None) -> None:
        self._batch_begin(ModeKeys.EVAL)

    def on_predict_batch_begin(self, batch: int, logs: Any = None) -> None:
        self._batch_begin(ModeKeys.PREDICT)

    def _batch_begin(self, mode: ModeKeys) -> None:
        if mode is self._step_mode and mode is self.mode:
            quiet = self._quiet
            if quiet:  # BaseHook._begin_step's quiet path, inlined
                self._quiet = quiet - 1
                self.step += 1
                self._mode_step += 1
                return
        self.guard.run("batch_begin", self._full_begin, mode)

    def _full_begin(self, mode: ModeKeys) -> None:
        self.set_mode(mode)
        self._begin_full_step()
        if (self._optimizers and self._saving and mode is ModeKeys.TRAIN
                and CollectionKeys.GRADIENTS in self._due):
            self._swap_in_capture()

    def _swap_in_capture(self) -> None:
        """Run this batch with the capture train function in place of Keras' own one.

        ``fit`` and ``train_on_batch`` look ``model.train_function`` up at every batch. The capture
        function is built by Keras itself (``make_train_function(force=True)``: the model's
        ``train_step``, ``jit_compile`` and ``run_eagerly``), once per Keras train function (a
        new one after ``compile``); tracing it costs one more trace at the first saving batch.
        """
        model = self.model
        if model is None or not hasattr(model, "make_train_function"):
            return
        model.make_train_function()  # what fit / train_on_batch do first (a no-op once made)
        own = model.train_function
        if self._capture_fn is None or self._capture_fn[0] is not own:
            model.make_train_function(force=True)
            built = model.train_function
            model.train_function = own

            def capture(*args: Any, **kwargs: Any) -> Any:
                self._tracing_capture = True
                try:
                    return built(*args, **kwargs)
                finally:
                    self._tracing_capture = False

            self._capture_fn = (own, capture)
        self._swapped = own
        model.train_function = self._capture_fn[1]

    def _swap_back(self) -> None:
        own, self._swapped = self._swapped, None
        if self.model is not None and own is not None:
            self.model.train_function = own

    def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
        self._batch_end(logs)

    def on_test_batch_end(self, batch: int, logs: Any = None) -> None:
        self._batch_end(logs)

    def on_predict_batch_end(self, batch: int, logs: Any = None) -> None:
        self._batch_end(logs)

    def _batch_end(self, logs: Any) -> None:
        extras = _take_layer_outputs(logs)
        if self._saving:
            self.guard.run("batch_end", self._save_batch, logs, extras)
        if self._swapped is not None:  # also when saving failed: Keras' own function comes back
            self._swap_back()

    def on_epoch_end(self, epoch: int, logs: Any = None) -> None:
        # Keras falls back to the last batch's logs for the epoch's: History must not keep them.
        _take_layer_outputs(logs)

    def on_test_end(self, logs: Any = None) -> None:
        _take_layer_outputs(logs)

    def on_train_end(self, logs: Any = None) -> None:
        _take_layer_outputs(logs)
        if self._swapped is not None:  # a batch that raised before its end
            self._swap_back()
        # The last step goes to the writer now; close() (or exit) writes the end marker.
        self.guard.run("on_train_end", self._end_step)

    @guarded
    def _save_batch(self, logs: Any, extras: dict[str, Any] | None) -> None:
        # (collection, name, value) of everything due, so the variables are read in one call.
        due: list[tuple[str, str, Any]] = []
        if isinstance(logs, dict):
            for key, value in logs.items():
                if key == "batch" or value is None:
                    continue
                due.append((CollectionKeys.LOSSES if key in LOSS_KEYS else CollectionKeys.METRICS, str(key), value))
        if extras:
            for name, value in extras.items():
                due.append((CollectionKeys.OUTPUTS, name, value))
                self.collections.get(CollectionKeys.LAYERS).add_tensor_name(name)
        model = self.model
        if model is not None:
            for layer in model.layers:
                for var in layer.weights:
                    name = f"{layer.name}/weights/{_var_path(var)}:0"
                    due.append((CollectionKeys.BIASES if BIAS_PATTERN in name else CollectionKeys.WEIGHTS, name, var))
            optimizer = getattr(model, "optimizer", None)
            if optimizer is not None and self._step_mode in (ModeKeys.TRAIN, ModeKeys.GLOBAL):
                for var in optimizer.variables:
                    due.append((CollectionKeys.OPTIMIZER_VARIABLES, f"{_var_path(var)}:0", var))
        if self._grads_written and self._swapped is not None:  # the shadows hold this batch's
            for _var, shadow, name in self._shadows.values():
                due.append((CollectionKeys.GRADIENTS, name, shadow))
        due = [item for item in due if self._wants(item[0], item[1])]
        for (_cname, name, _value), value in zip(due, self._read_values([v for _c, _n, v in due]), strict=True):
            self._save(name, value)

    def _save_member(self, cname: str, name: str, value: Any) -> None:
        if self._wants(cname, name):
            self._save(name, value)

    def _wants(self, cname: str, name: str) -> bool:
        coll = self.collections.collections.get(cname)
        if coll is None or cname not in self._due:
            return False
        if not coll.has_tensor_name(name):
            coll.add_tensor_name(name)
            self.collections.invalidate()
        return True

    def _read_values(self, values: list[Any]) -> list[Any]:
        """numpy copies of ``values``; the variables among them are read by one compiled call.

        Reading a Keras variable eagerly (``.numpy()``) costs ~0.1-0.2 ms each on CPU, and each
        reduction read it again: a saving step of a small model spent milliseconds there.
        """
        out: list[Any] = list(values)
        pairs = [(i, tv) for i, v in enumerate(values) if (tv := _tf_variable(v)) is not None]
        if not pairs:
            return out
        at = [i for i, _ in pairs]
        variables = [tv for _, tv in pairs]
        key = tuple(id(v) for v in variables)
        reader = self._readers.get(key)
        if reader is None:
            reader = tf.function(lambda: [tf.identity(v) for v in variables])
            self._readers[key] = reader
        for i, tensor in zip(at, reader(), strict=True):
            out[i] = tensor.numpy()
        return out

    @guarded
    def save_tensor(self, tensor_name: str, tensor_value: Any, collections_to_write: Any = "default") -> None:
        """Save a custom tensor (eager value, variable or numpy) in the given collections."""
        BaseHook.save_tensor(self, tensor_name, tensor_value, collections_to_write)

    def record_tensor_value(self, tensor_name: str, tensor_value: Any) -> None:
        """smdebug's name for :meth:`save_tensor` in the ``default`` collection."""
        self.save_tensor(tensor_name, tensor_value)

