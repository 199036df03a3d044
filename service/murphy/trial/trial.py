"""``Trial``: smdebug's reader over one training job's tensor output, on any ``ObjectStore``.

Discovery is from index files only (see :mod:`murphy.trial.discovery`); values are fetched
lazily, one ranged record at a time (see :mod:`murphy.trial.fetch`).

Freshness: a query whose answer can change with what is on the store (``steps()``,
``has_passed_step`` of a step not yet settled, a tensor or step not seen yet ...) refreshes
first, as in smdebug, so it answers from the store as it is *now*. A refresh is incremental: one
``list(index/, start_after=token)`` (only the keys of incomplete and new steps) plus one
existence check of the end marker. Answers that can no longer change (a value of a known step,
``AVAILABLE``/``UNAVAILABLE``, a known mode step) are given without any request, and nothing
refreshes once training has ended and every step is loaded. ``poll_interval`` only paces
``wait_for_steps`` and the rule engine's idle loop.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from types import MappingProxyType

from murphy.core.collection import Collection
from murphy.core.modes import ModeKeys, as_mode
from murphy.exceptions import TensorUnavailable
from murphy.storage.base import ObjectStore
from murphy.tensorio.index import IndexTable, ParsedIndex
from murphy.tensorio.locations import END_OF_TRAINING_KEY
from murphy.trial import stepvalues
from murphy.trial.batch import BatchValues, read_values
from murphy.trial.discovery import IndexScanner
from murphy.trial.fetch import RecordFetcher
from murphy.trial.opening import (
    OpeningPrefetch,
    ReaderSettings,
    load_collections,
    smdebug_index_token,
)
from murphy.trial.state import StepBook, StepState
from murphy.trial.tables import Slot, TableView
from murphy.trial.tensor import Tensor
from murphy.trial.waiting import NoMoreDataTimeout, wait_for_step

__all__ = ["NoMoreDataTimeout", "Trial"]

log = logging.getLogger(__name__)

_NO_FILES: Mapping[str, tuple[str, TableView]] = MappingProxyType({})  # files_at of a step not seen


class Trial(stepvalues.StepQueries):
    """One training job's saved tensors. Build it with :func:`murphy.trial.create_trial`.

    ``write_order`` / ``inputs`` / ``labels`` / ``predictions``: see :class:`~murphy.trial.stepvalues.StepQueries`."""

    def __init__(
        self,
        store: ObjectStore,
        *,
        name: str,
        path: str,
        settings: ReaderSettings,
        range_steps: tuple[int | None, int | None] | None = None,
        check: bool = False,
        index_mode: bool = True,
        cache: bool = False,
    ) -> None:
        self.name = name
        self.path = path
        self.range_steps = range_steps
        self.check = check
        self.index_mode = index_mode
        self.cache = cache
        self.dynamic_refresh = True
        self.logger = log  # smdebug's trials have one; custom rules log through it
        self._store = store
        self._settings = settings
        self._lock = threading.RLock()
        self._tensors: dict[str, Tensor] = {}
        # global step → worker → (events file, view of its index table)
        self._step_files: dict[int, dict[str, tuple[str, TableView]]] = {}
        self._views: dict[int, TableView] = {}  # by id() of the (kept alive) table
        self._mode_tensors: dict[ModeKeys, set[str]] = {}
        self._mode_views: set[tuple[ModeKeys, int]] = set()
        self.version = 0  # bumped on every index file read; Tensor caches key on it
        self._event_sizes: dict[str, int] = {}
        self._scanner = IndexScanner(store, range_steps)
        self._fetcher = RecordFetcher(
            store,
            file_sizes=self._event_sizes,
            missing_event_timeout=settings.missing_event_timeout,
            poll_interval=settings.poll_interval,
            training_ended=self.training_has_ended,
        )
        loaded = load_collections(store, settings, OpeningPrefetch.start(store))
        self._first_ended = loaded.ended_at_open
        self._collections = loaded.collections
        self._workers = set(loaded.workers)
        self._book = StepBook(loaded.num_workers)
        self._last_refresh = float("-inf")
        self._last_new_data = time.monotonic()
        self.refresh()

    def __repr__(self) -> str:
        return f"<murphy Trial name={self.name!r} path={self.path!r} steps={len(self._book.global_to_mode)}>"

    def __hash__(self) -> int:
        return hash((self.name, self.path))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Trial):
            return NotImplemented
        return (self.name, self.path) == (other.name, other.path)

    # --- state --------------------------------------------------------------------------------

    @property
    def store(self) -> ObjectStore:
        return self._store

    @property
    def loaded_all_steps(self) -> bool:
        """True once the end-of-training marker was seen and the final refreshes done."""
        return self._book.loaded_all_steps

    @property
    def last_complete_step(self) -> int:
        return self._book.last_complete_step

    @property
    def num_workers(self) -> int:
        return self._book.num_workers

    @property
    def last_index_token(self) -> str | None:
        """The last index file read up to the last complete step, joined with the trial path as
        smdebug's is (a local path, or the S3 key with the prefix); None before any complete step."""
        return smdebug_index_token(self._store, self.path, self._scanner.last_index_token)

    def training_has_ended(self) -> bool:
        """True if ``training_job_end.ts`` exists."""
        return self._store.exists(END_OF_TRAINING_KEY)

    # --- refresh ------------------------------------------------------------------------------

    def maybe_refresh(self, name: str | None = None) -> None:
        """Refresh (incrementally) unless refreshing is off or every step is loaded, as smdebug."""
        if self._book.loaded_all_steps or not self.dynamic_refresh:
            return
        self.refresh()

    def refresh_data(self) -> None:
        """smdebug's name for :meth:`refresh`."""
        self.refresh()

    def refresh_tensor(self, tname: str, steps: Iterable[int] | None = None) -> None:
        """smdebug's per-tensor refresh: like smdebug, it refreshes everything."""
        self.refresh()

    def refresh(self) -> None:
        """Read new index files; on the end marker, refresh once more after ``end_delay`` and
        mark every step loaded."""
        with self._lock:
            if self._book.loaded_all_steps:
                return
            first, self._first_ended = self._first_ended, None  # the open's prefetched answer
            ended = first() if first is not None else self.training_has_ended()
            self._read_new_index_files()
            if ended:
                # The second read is for files that reach a lagging store after the marker (smdebug's
                # end delay); with no delay it would be the same read again, one more round trip.
                if self._settings.end_delay > 0:
                    time.sleep(self._settings.end_delay)
                    self._read_new_index_files()
                self._book.mark_ended()
                log.info("trial %s: training has ended; loaded all steps", self.name)

    def _read_new_index_files(self) -> None:
        found = False
        for item in self._scanner.scan():
            self._add_index(item.step, item.worker, item.index)
            found = True
        now = time.monotonic()
        if found:
            self._last_new_data = now
        self._book.apply_window(self._settings.incomplete_step_window)
        self._scanner.advance(self._book.last_complete_step)
        self._last_refresh = now

    def _tensor_for(self, name: str) -> Tensor:
        t = self._tensors.get(name)
        if t is None:
            t = self._tensors[name] = Tensor(name, self, cache=self.cache)
        return t

    def _view_of(self, table: IndexTable, mode: ModeKeys) -> TableView:
        view = self._views.get(id(table))
        if view is None:
            view = self._views[id(table)] = TableView(table)
            for name in view.names:
                self._tensor_for(name)
        if mode is not ModeKeys.GLOBAL and (mode, id(table)) not in self._mode_views:
            self._mode_views.add((mode, id(table)))
            self._mode_tensors.setdefault(mode, set()).update(view.names)
        return view

    def _add_index(self, step: int, worker: str, index: ParsedIndex) -> None:
        self._book.add(step, worker, index.mode, index.mode_step)
        self._workers.add(worker)
        view = self._view_of(index.table, index.mode)
        fname = index.event_file_name
        self._step_files.setdefault(step, {})[worker] = (fname, view)
        if index.table.end > self._event_sizes.get(fname, 0):
            self._event_sizes[fname] = index.table.end
        for name, original in view.original_names:
            self._tensors[name].original_name = original
        self.version += 1

    def _slots(self, step: int, name: str) -> dict[str, tuple[str, Slot]] | None:
        """``{worker: (events file, slot)}`` of tensor ``name`` at global ``step`` (None: not saved)."""
        files = self._step_files.get(step)
        if files is None:
            return None
        out = None
        for worker, (fname, view) in files.items():
            slot = view.slots.get(name)
            if slot is not None:
                if out is None:
                    out = {}
                out[worker] = (fname, slot)
        return out

    def _saved_at(self, step: int, name: str) -> bool:
        files = self._step_files.get(step)
        return files is not None and any(name in view.names for _, view in files.values())

    # --- what each worker wrote, as last refreshed (no refresh): for murphy.trial.worker_view --

    @property
    def state_version(self) -> tuple[int, int]:
        """Changes whenever an index file is read or a step's completeness changes: the key of
        caches of answers derived from :meth:`files_at` and :meth:`worker_steps`."""
        return (self.version, self._book.version)

    def files_at(self, step: int, mode: ModeKeys = ModeKeys.GLOBAL) -> Mapping[str, tuple[str, TableView]]:
        """Each worker's ``(events file, index table view)`` at ``step`` (a mode step with ``mode``)."""
        g = self._book.global_step(mode, step)
        return self._step_files.get(g, _NO_FILES) if g is not None else _NO_FILES

    def worker_steps(self, worker: str, mode: ModeKeys, show_incomplete_steps: bool = False) -> list[int]:
        """The :meth:`steps` that ``worker`` wrote: one pass with a dict lookup per step."""
        files, every = self._step_files, self._book.steps(mode, show_incomplete_steps)
        if mode is ModeKeys.GLOBAL:
            return [s for s in every if worker in files.get(s, ())]
        to_global = self._book.mode_to_global.get(mode, {})
        return [s for s in every if worker in files.get(to_global[s], ())]

    # --- tensors ------------------------------------------------------------------------------

    def has_tensor(self, tname: str) -> bool:
        """True if the tensor (or a reduction of it) was saved at some step."""
        if tname not in self._tensors:
            self.maybe_refresh(tname)
        return tname in self._tensors

    def tensor(self, tname: str) -> Tensor:
        """The :class:`Tensor` named ``tname``; ``TensorUnavailable`` if it was never saved."""
        if self.has_tensor(tname):
            return self._tensors[tname]
        raise TensorUnavailable(tname)

    def tensor_names(
        self,
        show_prefixed_tensors: bool = False,
        *,
        step: int | None = None,
        mode: ModeKeys = ModeKeys.GLOBAL,
        regex: str | Iterable[str] | None = None,
        collection: str | Collection | None = None,
    ) -> list[str]:
        """Sorted names saved (at ``step`` of ``mode`` if given), filtered by ``regex`` (str or
        list, ``re.search``) or by ``collection`` (name or Collection), not both.

        Reductions are folded into their base name; ``show_prefixed_tensors`` is accepted for
        smdebug compatibility and changes nothing (as in smdebug 1.0.34).
        """
        if regex is not None and collection is not None:
            raise ValueError("Only one of `regex` or `collection` can be passed to this method")
        mode = as_mode(mode)
        self.maybe_refresh()
        if step is not None:
            files = self.files_at(step, mode)
            names: Iterable[str] = set().union(*(v.names for _, v in files.values())) if files else ()
        elif mode is ModeKeys.GLOBAL:
            names = self._tensors.keys()
        else:
            names = self._mode_tensors.get(mode, ())
        if regex is not None:
            patterns = [re.compile(r) for r in ([regex] if isinstance(regex, str) else list(regex))]
            return sorted(n for n in names if any(p.search(n) for p in patterns))
        if collection is not None:
            coll = self.collection(collection if isinstance(collection, str) else collection.name)
            return sorted(n for n in names if coll.matches(n))
        return sorted(names)

    def tensor_values(
        self,
        names: Sequence[str],
        steps: Iterable[int] | Mapping[str, Iterable[int]] | None = None,
        mode: ModeKeys = ModeKeys.GLOBAL,
        worker: str | None = None,
    ) -> dict[str, BatchValues]:
        """Many steps of a few tensors in one pass (murphy extension; see :mod:`murphy.trial.batch`):
        the values ``tensor(name).value(step, mode, worker)`` would give, one request per events
        file, and per step the error it would raise instead of raising it."""
        return read_values(self, names, steps, mode=mode, worker=worker)

    # --- collections and workers --------------------------------------------------------------

    def collections(self) -> dict[str, Collection]:
        """Every collection of the (first) collections file, saved or not."""
        return self._collections

    def collection(self, coll_name: str) -> Collection:
        """One collection by name. An unknown name gets a new, empty collection that
        :meth:`collections` lists from then on, as smdebug's ``CollectionManager.get`` does."""
        coll = self._collections.get(coll_name)
        if coll is None:
            coll = self._collections[coll_name] = Collection(coll_name)
        return coll

    def workers(self) -> list[str]:
        """Workers that wrote a collections or index file, sorted."""
        self.maybe_refresh()
        return sorted(self._workers)

    # --- steps and modes ----------------------------------------------------------------------

    def steps(self, mode: ModeKeys = ModeKeys.GLOBAL, show_incomplete_steps: bool = False) -> list[int]:
        """Saved steps (mode steps for a mode), sorted; incomplete ones only on request."""
        mode = as_mode(mode)
        self.maybe_refresh()
        return list(self._book.steps(mode, show_incomplete_steps))

    def modes(self) -> list[ModeKeys]:
        """Modes seen, GLOBAL excluded."""
        self.maybe_refresh()
        return sorted(self._book.mode_to_global, key=lambda m: m.value)

    def global_step(self, mode: ModeKeys, mode_step: int) -> int | None:
        """The global step of ``(mode, mode_step)``, or None if it was not saved."""
        mode = as_mode(mode)
        g = self._book.global_step(mode, mode_step)
        if g is None:
            self.maybe_refresh()
            g = self._book.global_step(mode, mode_step)
        return g

    def mode_modestep(self, global_step: int) -> tuple[ModeKeys | None, int | None]:
        """``(mode, mode_step)`` of a global step, ``(None, None)`` if not saved."""
        x = self._book.global_to_mode.get(global_step)
        if x is None:
            self.maybe_refresh()
            x = self._book.global_to_mode.get(global_step)
        return (None, None) if x is None else x

    def mode(self, global_step: int) -> ModeKeys | None:
        return self.mode_modestep(global_step)[0]

    def mode_step(self, global_step: int) -> int | None:
        return self.mode_modestep(global_step)[1]

    def has_passed_step(self, step: int, mode: ModeKeys = ModeKeys.GLOBAL) -> StepState:
        """AVAILABLE (saved and complete), UNAVAILABLE (skipped / past the end) or NOT_YET_AVAILABLE.

        AVAILABLE and UNAVAILABLE never change, so they are answered without a refresh; only a
        step that may still come asks the store."""
        mode = as_mode(mode)
        state = self._book.has_passed_step(step, mode)
        if state is not StepState.NOT_YET_AVAILABLE:
            return state
        self.maybe_refresh()
        return self._book.has_passed_step(step, mode)

    def wait_for_steps(self, required_steps: Iterable[int], mode: ModeKeys = ModeKeys.GLOBAL) -> None:
        """Block until each step is available; raise ``StepUnavailable`` for a skipped step and
        ``NoMoreData`` for one past the end (``NoMoreDataTimeout`` after ``no_marker_timeout``
        seconds without new data or end marker, when that is set)."""
        mode = as_mode(mode)
        for step in required_steps:
            wait_for_step(self, step, mode)
