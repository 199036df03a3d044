"""The framework-neutral hook: steps and modes, collections, save decisions, reductions,
hand-off to the background writer, the error guard and ``close()``.

A framework adapter calls :meth:`BaseHook._begin_step` at the start of every top-level forward
(or inlines its quiet-step fast path, see :attr:`BaseHook._quiet`) and :meth:`BaseHook._save` for
every candidate tensor; it never imports anything from here that touches files. Nothing is read
from the environment until a hook is constructed.
"""

from __future__ import annotations

import atexit
import logging
import os
import sys
import weakref
from collections.abc import Iterable
from typing import Any

from murphy.core.collection import Collection, CollectionKeys
from murphy.core.modes import ModeKeys
from murphy.core.reduction_config import ReductionConfig
from murphy.core.save_config import SaveConfig
from murphy.exceptions import HookError
from murphy.hook.backend import NumpyBackend, TensorBackend
from murphy.hook.collections import (
    PYTORCH_COLLECTION_REGEXES,
    HookCollections,
    collections_json_bytes,
)
from murphy.hook.guard import LOGGER_NAME, ErrorGuard, guarded
from murphy.hook.outdir import refuse_ended, resolve_out_dir
from murphy.hook.tensorboard import TensorBoardSink
from murphy.hook.tensorboard import resolve_dir as resolve_tensorboard_dir
from murphy.hook.writer import (
    DEFAULT_MAX_BLOCK,
    DEFAULT_MAX_PENDING,
    DEFAULT_MAX_PENDING_BYTES,
    BackgroundWriter,
    Record,
    StepBatch,
)
from murphy.storage import ObjectStore, open_store
from murphy.tensorio.locations import (
    collections_file_key,
    reduction_tensor_name,
    strip_output_index,
)
from murphy.tensorio.writer import write_end_of_training

_log = logging.getLogger(LOGGER_NAME)
INIT_STEP = -1
SCALAR_PREFIX = "scalar/"


def worker_name(rank: int) -> str:
    """smdebug's worker name for a rank."""
    return f"worker_{rank}"


class BaseHook:
    """Framework-neutral tensor capture with smdebug's semantics (see ``docs/hook.md``)."""

    # smdebug names a reduction of ``loss:0`` ``.../mean/loss`` for every framework but
    # TensorFlow, which keeps the output index (``.../mean/loss:0``).
    _reduction_keeps_output_index = False

    def __init__(
        self,
        out_dir: str | os.PathLike[str] | ObjectStore | None = None,
        dry_run: bool = False,
        reduction_config: ReductionConfig | None = None,
        save_config: SaveConfig | None = None,
        include_regex: Iterable[str] | None = None,
        include_collections: Iterable[str] | None = None,
        save_all: bool = False,
        include_workers: str = "one",
        *,
        backend: TensorBackend | None = None,
        rank: int = 0,
        world_size: int = 1,
        write_end_marker: bool | None = None,
        max_pending_steps: int = DEFAULT_MAX_PENDING,
        max_pending_bytes: int = DEFAULT_MAX_PENDING_BYTES,
        max_block_ms: float | None = DEFAULT_MAX_BLOCK * 1e3,
        collection_regexes: Any = PYTORCH_COLLECTION_REGEXES,
    ) -> None:
        if include_workers not in ("one", "all"):
            raise HookError(f"include_workers must be 'one' or 'all', got {include_workers!r}")
        self.guard = ErrorGuard()
        self.backend: TensorBackend = backend or NumpyBackend()
        self.dry_run = dry_run
        self.rank = rank
        self.worker = worker_name(rank)
        self.num_workers = world_size if include_workers == "all" else 1
        # With include_workers="one" only the chief writes (smdebug's rule).
        self._writes = not dry_run and (include_workers == "all" or rank == 0)
        if write_end_marker is None:
            # Inside SageMaker the platform writes the end marker after its final sync.
            write_end_marker = "TRAINING_JOB_NAME" not in os.environ
        self._write_end_marker = write_end_marker
        self.out_dir = resolve_out_dir(out_dir)
        self.store: ObjectStore = open_store(self.out_dir)
        if self._writes:
            refuse_ended(self.store)
        self.collections = HookCollections(
            save_config or SaveConfig(),
            reduction_config or ReductionConfig(save_raw_tensor=True),
            collection_regexes,
        )
        self.collections.on_invalidate = self._wake
        self.collections.include(include_collections or ())
        if include_regex:
            self.collections.get(CollectionKeys.DEFAULT).include(list(include_regex))
            self.collections.include([CollectionKeys.DEFAULT])
        if save_all:
            self.collections.get(CollectionKeys.ALL).include(".*")
            self.collections.include([CollectionKeys.ALL])
        # Back-pressure (murphy.hook.writer): a step waits at most max_block_ms for the writer,
        # then it is dropped and counted; max_block_ms=None waits instead and drops nothing.
        self._writer = self._new_writer(max_pending_steps, max_pending_bytes,
                                        None if max_block_ms is None else max_block_ms / 1e3)
        self.step = INIT_STEP
        self.mode = ModeKeys.GLOBAL
        self._mode_steps: dict[ModeKeys, int] = dict.fromkeys(ModeKeys, INIT_STEP)
        self._step_mode = ModeKeys.GLOBAL
        # The current step's mode step; folded into _mode_steps when the mode can change.
        self._mode_step = INIT_STEP
        # How many of the next steps need nothing but the two counters incremented: nothing is
        # due, the mode and the collections are unchanged and nothing is pending. Set by the
        # full step start, zeroed by everything that could change that (_wake).
        self._quiet = 0
        self._due: frozenset[str] = frozenset()
        # True while the current step may save anything: adapters test it before any other work.
        self._saving = False
        # Per mode's value (a ModeKeys' hash is a Python call): (collections generation, first
        # mode step at which anything may be due).
        self._next_due: dict[int, tuple[int, int]] = {}
        self._records: list[Record] = []
        self._pending_scalars: list[tuple[str, Any]] = []
        self._saved_any = False
        self._collections_written = False
        self._closed = False
        _register_atexit(self)

    # ---- public API ------------------------------------------------------------------------

    @property
    def mode_step(self) -> int:
        """The step counter of the current step's mode."""
        return self._mode_step

    @property
    def mode_steps(self) -> dict[ModeKeys, int]:
        """A snapshot of every mode's step counter."""
        steps = dict(self._mode_steps)
        steps[self._step_mode] = self._mode_step
        return steps

    @property
    def steps_dropped(self) -> int:
        """Saved steps dropped because the store fell behind for longer than ``max_block_ms``."""
        return self._writer.steps_dropped

    @property
    def enabled(self) -> bool:
        """False once an error disabled the hook (or after ``close()``)."""
        return not self.guard.disabled and not self._closed

    def set_mode(self, mode: ModeKeys) -> None:
        """Switch mode; takes effect at the next step."""
        if not isinstance(mode, ModeKeys):
            raise HookError(f"mode must be a ModeKeys member, got {mode!r}")
        if mode is not self._step_mode:
            self._quiet = 0
        self.mode = mode

    def get_collection(self, name: str) -> Collection:
        """The collection ``name`` (created if missing); changes take effect at once."""
        return self.collections.get(name)

    def get_collections(self) -> dict[str, Collection]:
        """All collections by name."""
        self.collections.invalidate()
        return self.collections.collections

    def add_to_collection(self, collection_name: str, tensor_name: str) -> None:
        """Add a tensor name to a collection."""
        self.collections.get(collection_name).add_tensor_name(tensor_name)

    @guarded
    def save_scalar(self, name: str, value: Any) -> None:
        """Save ``scalar/<name>`` with the current step (written if the step is saved)."""
        self._pending_scalars.append((SCALAR_PREFIX + name, value))
        # The next step start must hand it over (or drop it): no quiet step in between.
        self._quiet = 0

    @guarded
    def save_tensor(
        self, tensor_name: str, tensor_value: Any, collections_to_write: str | Iterable[str] = "default"
    ) -> None:
        """Save a custom tensor in the given collections (they become included)."""
        names = [collections_to_write] if isinstance(collections_to_write, str) else list(collections_to_write)
        for cname in names:
            self.collections.get(cname).add_tensor_name(tensor_name)
        self.collections.include(names)
        if self.step >= 0:
            self._set_due(self.collections.due(self._step_mode, self.mode_step))
        self._save(tensor_name, tensor_value)

    def enable_tensorboard(self, logdir: str | os.PathLike[str]) -> None:
        """Also write TensorBoard summaries of every saved step under ``logdir`` (murphy.hook.tensorboard)."""
        if not self._writes:
            return
        colls = self.collections

        def classify(name: str) -> list[tuple[str, bool]]:
            return [(c, colls.collections[c].save_histogram) for c in colls.matching(name)]

        self._writer.tensorboard = TensorBoardSink(os.fspath(logdir), self.worker, classify)

    def _new_writer(self, max_pending: int, max_pending_bytes: int, max_block: float | None) -> BackgroundWriter:
        """The hook's writer (built once, in the constructor); adapters may write inline instead."""
        return BackgroundWriter(self.store, self.worker, self.backend, self.guard, max_pending, max_pending_bytes,
                                max_block)

    def _setup_tensorboard(self, out_dir: object, export_tensorboard: bool, tensorboard_dir: str | None) -> None:
        """Adapters pass smdebug's TensorBoard arguments here, once their writer is in place."""
        tb_dir = resolve_tensorboard_dir(out_dir, export_tensorboard, tensorboard_dir)
        if tb_dir is not None:
            self.enable_tensorboard(tb_dir)

    def flush(self, timeout: float | None = None) -> bool:
        """Hand the current step to the writer and wait until everything queued is written."""
        self.guard.run("flush", self._end_step)
        return self._writer.flush(timeout)

    def close(self) -> None:
        """Write the last step, the collections file and (outside SageMaker) the end marker."""
        if self._closed:
            return
        self.guard.run("close", self._end_step)
        if self._writes and not self.guard.disabled:
            self._writer.submit_call(self._writer.flush_manifest, "step manifest")
            self.guard.run("close", self._export_collections)
            if self._write_end_marker:
                store = self.store
                self._writer.submit_call(lambda: write_end_of_training(store), "end of training")
        self._closed = True
        self._quiet = 0
        self.guard.run("close", self._set_due, frozenset())
        self._writer.close()

    # ---- adapter API -----------------------------------------------------------------------

    def _begin_step(self) -> None:
        """Start the next step (the adapter calls this at every top-level forward).

        A quiet step (see ``_quiet``) only increments the counters; adapters inline this test.
        """
        quiet = self._quiet
        if quiet:
            self._quiet = quiet - 1
            self.step += 1
            self._mode_step += 1
            return
        self._begin_full_step()

    def _begin_full_step(self) -> tuple[int, int]:
        """Start the next step with every check; compute how many quiet steps follow it.

        The next due step of each mode is precomputed and only recomputed when it is reached or
        when the collections changed. Returns the mode's ``(collections generation, next due
        mode step)`` (``sys.maxsize``: never).
        """
        if self._records or self._pending_scalars:
            self._end_step()
        if self._saved_any and not self._collections_written:
            self._export_collections()
        self.step += 1
        mode = self.mode
        if mode is self._step_mode:
            # The same mode: its counter is _mode_step (folded into _mode_steps on a change).
            mode_step = self._mode_step = self._mode_step + 1
        else:
            steps = self._mode_steps
            steps[self._step_mode] = self._mode_step
            self._step_mode = mode
            mode_step = self._mode_step = steps[mode] = steps[mode] + 1
        generation = self.collections.generation
        cached = self._next_due.get(mode._value_)
        if cached is None or cached[0] != generation or mode_step >= cached[1]:
            due, nxt = self.collections.schedule(mode, mode_step)
            cached = self._next_due[mode._value_] = (generation, sys.maxsize if nxt is None else nxt)
        else:
            due = frozenset()
        self._set_due(due)
        if not due and not self.guard.disabled and not self._closed:
            # Steps mode_step+1 .. next due-1 of this mode save nothing (until _wake).
            self._quiet = max(0, cached[1] - mode_step - 1)
        return cached

    def _wake(self) -> None:
        """Something changed that quiet steps would miss: the next step does the full start."""
        self._quiet = 0

    def _set_due(self, due: frozenset[str]) -> None:
        self._due = due
        saving = bool(due) and not self.guard.disabled and not self._closed
        if saving != self._saving:
            self._saving = saving
            self._saving_changed(saving)

    def _saving_changed(self, saving: bool) -> None:
        """Adapter hook: the current step started (or stopped) possibly saving anything."""

    def _is_saving(self) -> bool:
        """Cheap check for adapters: may anything be saved at this step?"""
        return self._saving and not self.guard.disabled and not self._closed

    def _save(self, name: str, value: Any) -> None:
        """Snapshot ``value`` under ``name`` if a due collection wants it."""
        due_now = self._due
        if not due_now or self.guard.disabled or self._closed:
            return
        # Every step saves the same names: their decisions are kept (by the collections, which
        # drop them whenever they change) while the due collections stay the same.
        colls = self.collections
        if colls.save_plans_due != due_now:
            colls.set_save_plans_due(due_now)
        plan = colls.save_plans.get(name)
        if plan is None:
            plan = colls.save_plan(name)
        if plan:
            self._snapshot(name, value, plan.save_raw, plan.save_shape, plan.reductions)

    def _snapshot(
        self, name: str, value: Any, raw: bool, shape: bool, reductions: tuple[tuple[str, bool], ...]
    ) -> None:
        backend = self.backend
        if not self._writes:
            return
        if reductions:
            base = name if self._reduction_keeps_output_index else strip_output_index(name)
            for op, is_abs in reductions:
                self._records.append(Record(reduction_tensor_name(base, op, is_abs), backend.reduce(value, op, is_abs)))
        tshape = backend.shape(value) if shape else None
        if raw:
            self._records.append(Record(name, backend.snapshot(value), tshape))
        elif tshape is not None:
            self._records.append(Record(name, None, tshape))

    def _end_step(self) -> None:
        """Hand the current step's snapshots to the writer (no file work here)."""
        if self.step < 0:
            return
        if self._pending_scalars and self._due:
            for name, value in self._pending_scalars:
                if self._writes:
                    self._records.append(Record(name, self.backend.snapshot(value)))
        self._pending_scalars.clear()
        if not self._records:
            return
        batch = StepBatch(self.step, self._step_mode, self._mode_step, self._records, self.backend.fence())
        self._records = []
        self._saved_any = True
        self._writer.submit_step(batch)

    def _export_collections(self) -> None:
        """Queue the collections file (once), after the steps already queued."""
        if self._collections_written or not self._writes:
            return
        self._collections_written = True
        # Serialised here (once) so later changes to the collections cannot race the writer.
        data = collections_json_bytes(self.collections, self.num_workers)
        store, key = self.store, collections_file_key(self.worker)
        self._writer.submit_call(lambda: store.put(key, data), "collections")


def _register_atexit(hook: BaseHook) -> None:
    # A weak reference: atexit must not keep every hook ever created alive.
    ref = weakref.ref(hook)

    def _close() -> None:
        h = ref()
        if h is not None:
            h.close()

    atexit.register(_close)

