"""Snapshot copies off the training thread, fenced before their sources can change.

On a saving step the PyTorch hook hands the copier thread *references* to the tensors it saves
(weights at the forward-pre hook, layer outputs at the forward hooks, gradients from
``param.grad`` at the end of the backward pass) instead of copying them on the training thread.
Those tensors do not change while forward and backward run, so the copier copies them
(``Tensor.copy_`` releases the GIL: on a second core it really runs beside training) into
staging buffers. Before anything may mutate them in place the training thread *fences*: it takes
back every copy the copier has not started, does those itself, waits for the one in progress (at
most one tensor's copy), and checks each source's version counter (torch bumps it at every
in-place op on the tensor or a view of it).

Without a core of its own the copier does not pay (``background`` False): when a writer process
already keeps the second core busy, its copies queue behind that process, and its wake-ups and
GIL hand-offs cost the training thread more than the copies it saves. The hand-offs then only
queue, and each fence copies what it settles in one ``_foreach_copy_`` call: the same rules, the
same fences, no second thread (torch_util.copier_wanted).

Two kinds of snapshot, two fences:

* *early* ones, taken at the step's start (weights, optimizer state), which the optimizer changes
  in place: fenced at the first in-step fence, ``optimizer.step()``'s pre-hook (every optimizer,
  torch's global hook) or, in a script without an optimizer, the end of the backward pass;
* *late* ones (layer outputs, gradients): nothing in a ``torch.optim`` step changes them, so once
  a learning step showed that (their versions unchanged up to the step's end in a step with an
  optimizer step), they are fenced only at the step's end (state :data:`LATE`) and their copies
  run during the optimizer step and the next forward. A late name that changes after backward
  (``clip_grad_norm_`` scales ``param.grad`` in place) but not before is fenced at the end of the
  backward pass instead (:data:`DEFERRED`), as are all of them in a script without an optimizer.

Correctness rules (docs/hook.md, "deferred copies"):

* a copy is valid only if the source's version at the fence equals its version at hand-off; the
  fence runs on the training thread, so no in-place kernel of training can be in flight then. A
  changed version means the copy may hold a later value: the record is not written (a counted
  WARNING), and that tensor name is copied on the training thread from then on;
* a name is deferred only after a *learning* step in which it was copied on the training thread
  and its version was watched: unchanged at the first in-step fence (optimizer or end of
  backward) makes it :data:`DEFERRED`, unchanged up to the step's end in a step with an optimizer
  step makes a late name :data:`LATE`. A script whose tensors change without an in-step fence (no
  ``torch.optim`` optimizer, or an in-place ReLU on a saved output) therefore keeps the on-thread
  copies. What no version counter sees (``param.data.add_(...)`` outside an optimizer, between the
  forward-pre hook and the first fence, or ``p.grad.data.zero_()`` before the step's end in a
  script with an optimizer) cannot be detected: such a script should set
  ``MURPHY_HOOK_DEFERRED_COPY=0``.
"""

from __future__ import annotations

import collections
import functools
import logging
import threading
from collections.abc import Callable

import torch

from murphy.hook.guard import LOGGER_NAME
from murphy.hook.staging import StagingPool

_log = logging.getLogger(LOGGER_NAME)

#: Hand-offs are batched: the copier is woken once this many bytes wait (or at :meth:`kick`),
#: not once per tensor (each wake-up costs the training thread a futex call and a GIL hand-off).
PUSH_BYTES = 1 << 20

#: The copier copies up to about this many bytes of queued snapshots in one call.
COPY_RUN_BYTES = 4 << 20

#: Per-name states: learning (copied on the thread, watched), deferred (fenced at the first
#: in-step fence), on the thread for good, late (a late name fenced at the step's end).
LEARNING, DEFERRED, ON_THREAD, LATE = 0, 1, 2, 3


class DeferredSnap:
    """A snapshot whose copy may still be pending: ``tensor`` is set once it is copied, and
    ``valid`` is cleared when its source changed before the fence (then it is not written).
    ``late``: fenced only at the step's end."""

    __slots__ = ("aliases", "late", "name", "nbytes", "pool_key", "src", "tensor", "valid", "version")

    def __init__(self, name: str, src: torch.Tensor | None, version: int, nbytes: int, late: bool = False) -> None:
        self.name = name
        #: Other names saved from the same tensor at the same version (one copy for all).
        self.aliases: list[str] | None = None
        self.src = src
        self.version = version
        self.nbytes = nbytes
        self.late = late
        self.tensor: torch.Tensor | None = None
        self.pool_key: tuple[tuple[int, ...], torch.dtype] | None = None
        self.valid = True


class _Probe:
    """A learning name's source, watched until the step's end."""

    __slots__ = ("early", "in_step", "name", "src", "version")

    def __init__(self, name: str, src: torch.Tensor, early: bool) -> None:
        self.name, self.src, self.version, self.early = name, src, src._version, early
        #: Its version at the first in-step fence was unchanged (None: no such fence yet).
        self.in_step: bool | None = None


class DeferredCopies:
    """The copier thread, its queue, the fences, and which names may be deferred."""

    def __init__(self, pool: StagingPool, alloc: Callable[[tuple[int, ...], torch.dtype], torch.Tensor],
                 background: bool = True) -> None:
        self._pool = pool
        self._alloc = alloc
        self._cond = threading.Condition(threading.Lock())
        self._queue: collections.deque[DeferredSnap] = collections.deque()
        self._busy: DeferredSnap | None = None
        self._thread: threading.Thread | None = None
        self._stop = False
        # Training thread only: snaps handed off / names watched since the last fence.
        self._handed: list[DeferredSnap] = []
        self._probes: list[_Probe] = []
        # One activation is often both a module's output and the next one's input: one copy.
        self._by_id: dict[int, DeferredSnap] = {}
        self._batch: list[DeferredSnap] = []
        self._batch_bytes = 0
        #: Set by the hook while it saves the step's early tensors (weights, optimizer state).
        self.early = False
        # Handed since the last fence and settled by the first in-step fence: early snaps,
        # DEFERRED late ones.
        self._early_due = False
        self._late_due = False
        self._optimizer_seen = False
        # Whether the last completed step had an optimizer step: its early snaps wait for it.
        self._expect_optimizer = False
        self.state: dict[str, int] = {}
        #: Records not written because their source changed before its copy was fenced.
        self.invalidated = 0
        self.copied_on_thread = 0
        self.copied_off_thread = 0
        #: Whether a copier thread copies between fences; when False the fences do every copy,
        #: one ``_foreach_copy_`` call each (torch_util.copier_wanted says when that is better).
        self.background = background

    # ---- training thread -------------------------------------------------------------------

    def wants(self, name: str) -> bool:
        """True when ``name`` may be handed off (it passed a learning step)."""
        state = self.state.get(name, LEARNING)
        return state in (DEFERRED, LATE)

    def probe(self, name: str, src: torch.Tensor) -> None:
        """Watch an on-thread-copied ``name`` until the step's end (the learning step)."""
        if name not in self.state:
            self._probes.append(_Probe(name, src, self.early))

    def defer(self, name: str, src: torch.Tensor) -> DeferredSnap:
        """A snapshot of ``src`` to be copied off the training thread."""
        hit = self._by_id.get(id(src))
        if hit is not None and hit.src is src and hit.version == src._version:
            if name != hit.name:
                hit.aliases = [*(hit.aliases or ()), name]
            return hit
        snap = self._new(name, src, src._version, src.numel() * src.element_size())
        self._by_id[id(src)] = snap
        self._push(snap)
        return snap

    def _new(self, name: str, src: torch.Tensor | None, version: int, nbytes: int) -> DeferredSnap:
        early = self.early
        late = not early and self.state.get(name) == LATE
        snap = DeferredSnap(name, src, version, nbytes, late)
        if early:
            self._early_due = True
        elif not late:
            self._late_due = True
        self._handed.append(snap)
        return snap

    def _push(self, snap: DeferredSnap) -> None:
        self._batch.append(snap)
        self._batch_bytes += snap.nbytes
        if self._batch_bytes >= PUSH_BYTES:
            self.kick()

    def kick(self) -> None:
        """Give the copier every hand-off batched so far (the end of a forward, of the weights)."""
        batch = self._batch
        if not batch:
            return
        self._batch, self._batch_bytes = [], 0
        if not self.background:  # no other thread: queued for the next fence
            self._queue.extend(batch)
            return
        with self._cond:
            self._queue.extend(batch)
            self._cond.notify()
        if self._thread is None:
            self._start()

    def backward_end(self) -> None:
        """The end of a backward pass: a fence only where something needs it there (names
        still learning, :data:`DEFERRED` late names, early snaps in a script without an
        optimizer step); otherwise the copier just gets the gradients batched so far."""
        if self._probes or self._late_due or (self._early_due and not self._expect_optimizer):
            self.fence(True)
        else:
            self.kick()

    def fence(self, in_step: bool, optimizer: bool = False) -> None:
        """Make the copies handed off so far complete and checked (see the module docs): at an
        in-step fence (``optimizer``: ``optimizer.step()``'s pre-hook; otherwise the end of a
        backward pass) all but the :data:`LATE` ones, at the step's end (``in_step`` False) all.
        """
        if optimizer:
            self._optimizer_seen = True
        if in_step and not self._early_due and not self._late_due and not self._probes:
            return
        if not self._handed and not self._probes:
            return
        self.kick()
        settle = self._handed if not in_step else [s for s in self._handed if not s.late]
        if settle:
            with self._cond:
                if in_step:
                    stolen = [s for s in self._queue if not s.late]
                    kept = [s for s in self._queue if s.late]
                    self._queue.clear()
                    self._queue.extend(kept)
                else:
                    stolen = list(self._queue)
                    self._queue.clear()
            if stolen:  # one call for all of them (one GIL release, no per-tensor Python)
                self._copy_run(stolen)
                self.copied_on_thread += len(stolen)
            with self._cond:
                while self._busy is not None and (not in_step or not self._busy.late):
                    self._cond.wait()
            for snap in settle:
                src = snap.src
                if not snap.valid or src is None or snap.tensor is None or src._version != snap.version:
                    self._invalidate(snap)
                snap.src = None
            self._handed = [s for s in self._handed if s.late] if in_step else []
        self._early_due = self._late_due = False
        self._by_id.clear()
        self._judge(in_step)

    def _judge(self, in_step: bool) -> None:
        """Decide the learning names watched since the step's start (see the module docs)."""
        state = self.state
        if in_step:
            keep = []
            for p in self._probes:
                unchanged = p.src._version == p.version
                if p.early:  # decided at the first in-step fence
                    if state.get(p.name, LEARNING) == LEARNING:
                        state[p.name] = DEFERRED if unchanged else ON_THREAD
                    continue
                if p.in_step is None:
                    p.in_step = unchanged
                keep.append(p)
            self._probes = keep
            return
        optimizer = self._optimizer_seen
        for p in self._probes:
            if p.early or state.get(p.name, LEARNING) != LEARNING:
                continue  # early names without an in-step fence stay learning (copied on the thread)
            if p.in_step is False:
                state[p.name] = ON_THREAD
            elif optimizer and p.src._version == p.version:
                state[p.name] = LATE
            elif p.in_step:
                state[p.name] = DEFERRED
            elif optimizer:
                state[p.name] = ON_THREAD
        self._probes = []

    def step_end(self) -> None:
        """The step's last fence: every copy done and checked, the learning names decided."""
        self.fence(in_step=False)
        self._expect_optimizer = self._optimizer_seen
        self._optimizer_seen = False

    def _invalidate(self, snap: DeferredSnap) -> None:
        snap.valid = False
        self.invalidated += 1
        for name in (snap.name, *(snap.aliases or ())):
            if self.state.get(name) != ON_THREAD:
                self.state[name] = ON_THREAD
                _log.warning("murphy hook: %s changed in place before its deferred copy was checked; it is "
                             "not written for this step (%d records so far) and is copied on the training "
                             "thread from now on", name, self.invalidated)

    def close(self) -> None:
        """Fence what is left and stop the copier thread."""
        self.step_end()
        thread = self._thread
        if thread is not None:
            with self._cond:
                self._stop = True
                self._cond.notify_all()
            thread.join()
            self._thread = None
            self._stop = False

    # ---- both threads ----------------------------------------------------------------------

    def _take(self, src: torch.Tensor, nbytes: int) -> tuple[torch.Tensor, tuple[tuple[int, ...], torch.dtype]]:
        """A staging buffer for a copy of ``src`` and its pool key."""
        key = (tuple(src.shape), src.dtype)
        return self._pool.take(key, nbytes, functools.partial(self._alloc, key[0], key[1])), key

    def _copy(self, snap: DeferredSnap) -> None:
        src = snap.src
        if src is None:
            return
        try:
            buf, key = self._take(src, snap.nbytes)
            # no_grad: the copy must not join the autograd graph of a source that requires grad.
            with torch.no_grad():
                buf.copy_(src)
        except Exception:  # a tensor torch refuses to copy here: the fence drops the record
            snap.valid = False
            return
        snap.tensor, snap.pool_key = buf, key

    def _start(self) -> None:
        thread = threading.Thread(target=self._run, name="murphy-hook-copier", daemon=True)
        self._thread = thread
        thread.start()

    def _run(self) -> None:
        cond, queue = self._cond, self._queue
        while True:
            with cond:
                while not queue and not self._stop:
                    cond.wait()
                if not queue:
                    return
                # A run of queued snaps of one kind (a fence waits only for the kind it settles).
                first = queue.popleft()
                run, nbytes = [first], first.nbytes
                while queue and queue[0].late == first.late and nbytes < COPY_RUN_BYTES:
                    nbytes += queue[0].nbytes
                    run.append(queue.popleft())
                self._busy = first
            try:
                self._copy_run(run)
                self.copied_off_thread += len(run)
            except Exception:  # never kill the thread: the fence finds the copies missing
                for snap in run:
                    if snap.tensor is None:
                        snap.valid = False
            finally:
                with cond:
                    self._busy = None
                    cond.notify_all()

    def _copy_run(self, run: list[DeferredSnap]) -> None:
        """Copy ``run`` with one call: one GIL release for all of them instead of one per
        tensor (each is a hand-off the training thread may have to wait for)."""
        foreach = getattr(torch, "_foreach_copy_", None)
        if len(run) == 1 or foreach is None:
            for snap in run:
                self._copy(snap)
            return
        pool = self._pool
        taken: list[tuple[DeferredSnap, torch.Tensor, tuple[tuple[int, ...], torch.dtype]]] = []
        srcs: list[torch.Tensor] = []
        for snap in run:
            src = snap.src
            if src is None:
                continue
            try:
                buf, key = self._take(src, snap.nbytes)
            except Exception:
                snap.valid = False
                continue
            taken.append((snap, buf, key))
            srcs.append(src)
        try:
            with torch.no_grad():
                foreach([buf for _, buf, _ in taken], srcs)
        except Exception:  # one by one: only a tensor torch refuses to copy loses its record
            for snap, buf, key in taken:
                pool.give(key, snap.nbytes, buf)
                self._copy(snap)
            return
        for snap, buf, key in taken:
            snap.tensor, snap.pool_key = buf, key
