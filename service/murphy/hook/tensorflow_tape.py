"""``hook.wrap_tape(tape)``: a proxy of one ``tf.GradientTape`` for custom eager training loops.

No class is patched (smdebug patched ``GradientTape`` itself). Each ``with`` block of the proxy is
one TRAIN step; ``proxy.gradient(target, sources)`` computes the gradients with the real tape and,
at a saving step, saves (smdebug's tape names):

* the target as ``loss`` (``losses``);
* each source variable as ``weights/<variable.path>:0`` (``biases`` when the name contains
  ``bias``, else ``weights``), the value the gradients were computed at;
* each gradient as ``gradients/<variable.path>Grad`` (``gradients``).

Everything else the tape offers (``watch``, ``jacobian``, ``stop_recording``...) is delegated.
Inside a ``tf.function`` values are symbolic and cannot be saved: the proxy warns once and saves
nothing there (smdebug skipped them silently).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import tensorflow as tf

from murphy.core.collection import CollectionKeys
from murphy.core.modes import ModeKeys
from murphy.hook.guard import LOGGER_NAME
from murphy.hook.tensorflow_common import BIAS_PATTERN

if TYPE_CHECKING:
    from murphy.hook.tensorflow_keras import KerasHook

_log = logging.getLogger(LOGGER_NAME)


def _path(v: Any) -> str:
    name = str(getattr(v, "path", None) or v.name)
    head, sep, tail = name.rpartition(":")
    return head if sep and tail.isdigit() else name


class TapeProxy:
    """Behaves as the wrapped tape; saves a step's loss, weights and gradients."""

    def __init__(self, hook: KerasHook, tape: Any) -> None:
        self._hook = hook
        self._tape = tape
        self._warned = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._tape, name)

    def __enter__(self) -> TapeProxy:
        self._tape.__enter__()
        hook = self._hook
        hook.guard.run("wrap_tape", self._begin)
        return self

    def _begin(self) -> None:
        hook = self._hook
        hook.set_mode(ModeKeys.TRAIN)
        hook._begin_step()

    def __exit__(self, *exc: Any) -> Any:
        return self._tape.__exit__(*exc)

    def gradient(self, target: Any, sources: Any, *args: Any, **kwargs: Any) -> Any:
        grads = self._tape.gradient(target, sources, *args, **kwargs)
        if self._hook._saving:
            self._hook.guard.run("wrap_tape.gradient", self._record, target, sources, grads)
        return grads

    def _record(self, target: Any, sources: Any, grads: Any) -> None:
        if not tf.executing_eagerly():
            if not self._warned:
                self._warned = True
                _log.warning("murphy hook: wrap_tape inside a tf.function sees symbolic tensors; "
                             "nothing is saved there (run the loop eagerly to save it)")
            return
        hook = self._hook
        hook._save_member(CollectionKeys.LOSSES, "loss", target)
        flat_sources = tf.nest.flatten(sources)
        flat_grads = tf.nest.flatten(grads) if grads is not None else []
        for var, grad in zip(flat_sources, flat_grads, strict=False):
            # tf.Variable, or a Keras 3 variable (which wraps one and has a ``path``).
            if not (isinstance(var, tf.Variable) or hasattr(var, "path")):
                continue
            path = _path(var)
            weight = f"weights/{path}:0"
            cname = CollectionKeys.BIASES if BIAS_PATTERN in weight else CollectionKeys.WEIGHTS
            hook._save_member(cname, weight, var)
            if grad is not None:
                if isinstance(grad, tf.IndexedSlices):
                    grad = tf.convert_to_tensor(grad)
                hook._save_member(CollectionKeys.GRADIENTS, f"gradients/{path}Grad", grad)
