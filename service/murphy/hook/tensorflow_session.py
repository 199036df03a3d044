"""smdebug's TF1 ``SessionHook`` (``tf.compat.v1.train.SessionRunHook``) on :class:`BaseHook`.

Each ``run`` through the ``MonitoredSession`` is one step (the first is step 0, counted per mode).
At a saving step :meth:`SessionHook.before_run` adds the due tensors to the run's fetches and
:meth:`SessionHook.after_run` hands their values to the background writer. Names are the graph's
own: a tensor is saved as ``tensor.name`` (``loss/loss:0``), a variable as ``variable.name``
(``initialize/weight1:0``) with its value read through ``variable.value()``, a gradient as the name
of the tensor ``compute_gradients`` returned
(``gradients/multiply/MatMul_1_grad/tuple/control_dependency_1:0``). Nothing is renamed.

Variables are read in a run of their own just before the step's run, so a saved weight is
always the value this step's loss and gradients were computed from (the pre-update value, as
the PyTorch hook saves it). smdebug fetched the read op in the train op's run, where TensorFlow
leaves the order open: a reference variable then often showed the post-update value.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from typing import Any

import tensorflow
import tensorflow.compat.v1 as tf

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
    VARIABLE_COLLECTIONS,
    TFNumpyBackend,
    env_rank_world,
)
from murphy.storage import ObjectStore

_log = logging.getLogger(LOGGER_NAME)
_PLACEHOLDER_OPS = frozenset({"Placeholder"})
_UNFETCHABLE_DTYPES = (tf.resource, tf.variant)
# ``tf.compat.v1.Variable`` is TensorFlow's VariableV1: a resource variable (a graph built without
# ``disable_v2_behavior()``, or with ``use_resource=True``) is a ``tensorflow.Variable`` but no
# VariableV1, so variables are recognised by the common base class.
_VARIABLE = tensorflow.Variable


class SessionHook(tf.train.SessionRunHook, BaseHook):  # type: ignore[misc]
    """smdebug's ``smdebug.tensorflow.SessionHook``: pass it to ``MonitoredSession(hooks=[...])``."""

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
        rank, world = env_rank_world()
        BaseHook.__init__(
            self, out_dir, dry_run, reduction_config, save_config, include_regex, include_collections,
            save_all, include_workers, backend=TFNumpyBackend(), rank=rank, world_size=world,
            collection_regexes=TF_COLLECTION_REGEXES, **kwargs,
        )
        self._setup_tensorboard(out_dir, export_tensorboard, tensorboard_dir)
        self.collections.include(TF_DEFAULT_INCLUDE)
        # Explicit members, per collection: export name -> the tensor (or variable) to fetch.
        self._members: dict[str, dict[str, Any]] = {}
        self._graph: Any = None
        # This graph's fetchable tensors by name (for regex collections), minus variables' own
        # outputs (a variable is fetched through its read op, under its own name).
        self._graph_tensors: dict[str, Any] = {}
        self._placeholders: list[Any] = []
        self._fetch_cache: dict[tuple[int, frozenset[str], frozenset[str]], dict[str, Any]] = {}
        self._depends_cache: dict[tuple[str, frozenset[str]], bool] = {}
        # Export names whose fetch is a variable's read (fetched before the step's run).
        self._variable_reads: set[str] = set()
        self._fetching = False

    @classmethod
    def create_from_json_file(cls, json_file_path: str | os.PathLike[str] | None = None) -> SessionHook:
        """A hook configured by ``debughookconfig.json`` (default path: see :class:`HookConfig`)."""
        return hook_from_config(cls, HookConfig.load(json_file_path))

    # ---- collections -----------------------------------------------------------------------

    def add_to_collection(self, collection_name: str, tensor: Any) -> None:
        """Add a tensor, variable, operation (its outputs), name, or a list of them."""
        self.guard.run("add_to_collection", self._add_member, collection_name, tensor)

    def _add_member(self, cname: str, item: Any, mode: ModeKeys | None = None) -> None:
        if isinstance(item, list | tuple | set):
            for x in item:
                self._add_member(cname, x, mode)
            return
        coll = self.collections.get(cname)
        if isinstance(item, str):
            coll.add_tensor_name(item)
            return
        if isinstance(item, tf.Operation):
            for out in item.outputs:
                self._add_member(cname, out, mode)
            return
        if isinstance(item, _VARIABLE):
            name, target = item.name, item
        elif isinstance(item, tf.Tensor | tf.IndexedSlices):
            name = item.name if isinstance(item, tf.Tensor) else item.values.name
            target = item if isinstance(item, tf.Tensor) else item.values
        else:
            _log.warning(
                "murphy hook: cannot add %r (%s) to collection %r: expected a tf.Tensor, "
                "tf.Variable, tf.Operation or a list of them", item, type(item).__name__, cname,
            )
            return
        coll.add_tensor_name(name)
        self._members.setdefault(cname, {})[name] = target
        self._fetch_cache.clear()

    @guarded
    def set_gradients(self, gradients_and_variables: Iterable[tuple[Any, Any]]) -> None:
        """Save these gradients (what ``compute_gradients`` returned) in ``gradients``."""
        for grad, _var in gradients_and_variables:
            if grad is not None:
                self._add_member(CollectionKeys.GRADIENTS, grad)

    @guarded
    def set_optimizer_variables(self, variables: Iterable[Any]) -> None:
        """Save these variables in ``optimizer_variables``."""
        for var in variables:
            self._add_member(CollectionKeys.OPTIMIZER_VARIABLES, var)

    def wrap_optimizer(self, optimizer: Any) -> Any:
        """Capture the gradients and variables of *this* optimizer instance; returns it.

        Only the instance's ``apply_gradients`` is replaced (``minimize`` calls it), so other
        optimizers of the same class are untouched.
        """
        if not isinstance(optimizer, tf.train.Optimizer):
            _log.warning(
                "murphy hook: wrap_optimizer needs a tf.compat.v1.train.Optimizer, got %s; "
                "gradients will not be saved", type(optimizer).__name__,
            )
            return optimizer
        original = optimizer.apply_gradients

        def apply_gradients(grads_and_vars: Any, *args: Any, **kwargs: Any) -> Any:
            pairs = list(grads_and_vars)
            self.set_gradients(pairs)
            result = original(pairs, *args, **kwargs)
            # Slots (Adam's m and v, beta powers) exist once apply_gradients built them.
            self.set_optimizer_variables(optimizer.variables())
            return result

        optimizer.apply_gradients = apply_gradients
        return optimizer

    # ---- SessionRunHook --------------------------------------------------------------------

    def begin(self) -> None:
        """Called by the MonitoredSession before the graph is finalized: find the tensors."""
        self.guard.run("begin", self._prepare_graph)

    def _prepare_graph(self) -> None:
        graph = tf.get_default_graph()
        self._graph = graph
        self._fetch_cache.clear()
        self._depends_cache.clear()
        for loss in tf.losses.get_losses():
            self._add_member(CollectionKeys.LOSSES, loss)
        for var in tf.trainable_variables():
            cname = CollectionKeys.BIASES if BIAS_PATTERN in var.name else CollectionKeys.WEIGHTS
            self._add_member(cname, var)
        # Reads are created now: the graph is finalized right after begin().
        variable_names: set[str] = set()
        for members in self._members.values():
            for name, target in list(members.items()):
                if isinstance(target, _VARIABLE) and target.graph is graph:
                    members[name] = target.value()
                    variable_names.add(name)
        self._variable_reads = variable_names
        self._graph_tensors = {}
        self._placeholders = []
        for op in graph.get_operations():
            if op.type in _PLACEHOLDER_OPS:
                self._placeholders.extend(op.outputs)
            if not graph.is_fetchable(op):
                continue
            for out in op.outputs:
                if out.dtype.base_dtype in _UNFETCHABLE_DTYPES or out.name in variable_names:
                    continue
                if out.dtype._is_ref_dtype:  # a reference variable's own output
                    continue
                self._graph_tensors[out.name] = out

    def before_run(self, run_context: Any) -> Any:
        # BaseHook._begin_step's quiet path, inlined: most steps save nothing.
        quiet = self._quiet
        if quiet:
            self._quiet = quiet - 1
            self.step += 1
            self._mode_step += 1
            return None
        return self.guard.run("before_run", self._before_run, run_context)

    def _before_run(self, run_context: Any) -> Any:
        self._fetching = False
        self._begin_full_step()
        if not self._saving or self._graph is None:
            return None
        fetches = self._due_fetches(run_context)
        reads = {n: t for n, t in fetches.items() if n in self._variable_reads}
        if reads:
            session = getattr(run_context, "session", None)
            if session is not None:
                # The hooked session's inner session: no hook runs again.
                for name, value in session.run(reads).items():
                    self._save(name, value)
            fetches = {n: t for n, t in fetches.items() if n not in reads}
        if not fetches:
            return None
        self._fetching = True
        return tf.train.SessionRunArgs(fetches)

    def after_run(self, run_context: Any, run_values: Any) -> None:
        if not self._fetching:
            return
        self._fetching = False
        self.guard.run("after_run", self._after_run, run_values)

    def _after_run(self, run_values: Any) -> None:
        results = run_values.results
        if isinstance(results, dict):
            for name, value in results.items():
                self._save(name, value)
        # The step goes to the writer when the next one starts (or at close): a scalar saved
        # after this run still belongs to it, and a step is written once.

    # ---- fetch selection -------------------------------------------------------------------

    def _due_fetches(self, run_context: Any) -> dict[str, Any]:
        feeds = getattr(getattr(run_context, "original_args", None), "feed_dict", None) or {}
        fed = {getattr(k, "name", str(k)) for k in feeds}
        unfed = frozenset(p.name for p in self._placeholders if p.name not in fed)
        due = self._due
        key = (self.collections.generation, unfed, due)
        cached = self._fetch_cache.get(key)
        if cached is not None:
            return cached
        fetches: dict[str, Any] = {}
        graph_tensors = self._graph_tensors
        for cname in due:
            for name, target in self._members.get(cname, {}).items():
                if isinstance(target, tf.Tensor) and target.graph is self._graph:
                    fetches[name] = target
            # Members given by name (add_to_collection("c", "scope/t:0"), the JSON config).
            for name in self.collections.collections[cname].tensor_names:
                if name not in fetches and name in graph_tensors:
                    fetches[name] = graph_tensors[name]
        regex_due = [
            c for c in due
            if c not in VARIABLE_COLLECTIONS and self.collections.collections[c].include_regex
        ]
        if regex_due:
            for name, tensor in graph_tensors.items():
                if name not in fetches and any(self.collections.collections[c].matches(name) for c in regex_due):
                    fetches[name] = tensor
        if unfed:
            fetches = {n: t for n, t in fetches.items() if not self._needs(t, unfed)}
        self._fetch_cache[key] = fetches
        return fetches

    def _needs(self, tensor: Any, unfed: frozenset[str]) -> bool:
        """True if computing ``tensor`` needs one of the ``unfed`` placeholders (a graph walk)."""
        key = (tensor.name, unfed)
        hit = self._depends_cache.get(key)
        if hit is not None:
            return hit
        seen: set[str] = set()
        stack = [tensor.op]
        needs = False
        while stack and not needs:
            op = stack.pop()
            if op.name in seen:
                continue
            seen.add(op.name)
            for inp in op.inputs:
                if inp.name in unfed:
                    needs = True
                    break
                stack.append(inp.op)
            stack.extend(op.control_inputs)
        self._depends_cache[key] = needs
        return needs


# smdebug's alias: the Estimator API itself is gone from TensorFlow (removed in 2.16).
EstimatorHook = SessionHook
