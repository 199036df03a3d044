"""Snapshot copies off the training thread, fenced before their sources can change.

On a saving step the PyTorch hook hands the copier thread *references* to the tensors it saves
(weights at the forward-pre hook, layer outputs at the forward hooks, gradients once accumulated
into ``param.grad``) instead of copying them on the training thread. Those tensors do not change
while forward and backward run, so the copier copies them (``Tensor.copy_`` releases the GIL: on a
second core it really runs beside training) into staging buffers. Before anything may mutate
them in place the training thread *fences*: it takes back every copy the copier has not started,
does those itself, waits for the one in progress (at most one tensor's copy), and checks each
source's version counter (torch bumps it at every in-place op on the tensor or a view of it).
Fences: ``optimizer.step()``'s pre-hook (every optimizer, torch's global hook), the end of each
backward pass (before gradient clipping can touch ``param.grad``), and the step's end.

Correctness rules (docs/hook.md, "deferred copies"):

* a copy is valid only if the source's version at the fence equals its version at hand-off; the
  fence runs on the training thread, so no in-place kernel of training can be in flight then. A
  changed version means the copy may hold a later value: the record is not written (a counted
  WARNING), and that tensor name is copied on the training thread from then on;
* a name is deferred only after a *learning* step in which it was copied on the training thread
  and an in-step fence (optimizer or end of backward) saw its version unchanged. A script whose
  tensors change without an in-step fence (no ``torch.optim`` optimizer, or an in-place ReLU on
  a saved output) therefore keeps the on-thread copies, exactly as before. What no version
  counter sees (``param.data.add_(...)`` outside an optimizer, between the forward-pre hook and
  the first fence) cannot be detected: such a script should set ``MURPHY_HOOK_DEFERRED_COPY=0``.
"""

from __future__ import annotations

import collections
import logging
import os
import threading
from collections.abc import Callable

import torch
from torch.optim import optimizer as torch_optimizer

from murphy.hook.guard import LOGGER_NAME
from murphy.hook.staging import StagingPool

_log = logging.getLogger(LOGGER_NAME)

#: Hand-offs are batched: the copier is woken once this many bytes wait (or at :meth:`kick`),
#: not once per tensor (each wake-up costs the training thread a futex call and a GIL hand-off).
PUSH_BYTES = 1 << 20

#: Per-name states: learning (copied on the thread, watched), deferred, on the thread for good.
LEARNING, DEFERRED, ON_THREAD = 0, 1, 2


class DeferredSnap:
    """A snapshot whose copy may still be pending: ``tensor`` is set once it is copied, and
    ``valid`` is cleared when its source changed before the fence (then it is not written)."""

    __slots__ = ("aliases", "name", "nbytes", "pool_key", "src", "tensor", "valid", "version")

    def __init__(self, name: str, src: torch.Tensor | None, version: int, nbytes: int) -> None:
        self.name = name
        #: Other names saved from the same tensor at the same version (one copy for all).
        self.aliases: list[str] | None = None
        self.src = src
        self.version = version
        self.nbytes = nbytes
        self.tensor: torch.Tensor | None = None
        self.pool_key: tuple[tuple[int, ...], torch.dtype] | None = None
        self.valid = True


class DeferredCopies:
    """The copier thread, its queue, the fence, and which names may be deferred."""

    def __init__(self, pool: StagingPool, alloc: Callable[[tuple[int, ...], torch.dtype], torch.Tensor]) -> None:
        self._pool = pool
        self._alloc = alloc
        self._cond = threading.Condition(threading.Lock())
        self._queue: collections.deque[DeferredSnap] = collections.deque()
        self._busy = False
        self._thread: threading.Thread | None = None
        self._stop = False
        # Training thread only: snaps handed off / names watched since the last fence.
        self._handed: list[DeferredSnap] = []
        self._probes: list[tuple[str, torch.Tensor, int]] = []
        # One activation is often both a module's output and the next one's input: one copy.
        self._by_id: dict[int, DeferredSnap] = {}
        self._batch: list[DeferredSnap] = []
        self._batch_bytes = 0
        self.state: dict[str, int] = {}
        #: Records not written because their source changed before its copy was fenced.
        self.invalidated = 0
        self.copied_on_thread = 0
        self.copied_off_thread = 0

    # ---- training thread -------------------------------------------------------------------

    def wants(self, name: str) -> bool:
        """True when ``name`` may be handed off (it passed a learning step)."""
        return self.state.get(name, LEARNING) == DEFERRED

    def probe(self, name: str, src: torch.Tensor) -> None:
        """Watch an on-thread-copied ``name`` until the next fence (the learning step)."""
        if name not in self.state:
            self._probes.append((name, src, src._version))

    def placeholder(self, name: str, like: torch.Tensor) -> DeferredSnap:
        """A snapshot whose source is handed later (:meth:`hand_off`): a gradient's value
        reaches ``param.grad`` only after the tensor hook returns."""
        snap = DeferredSnap(name, None, -1, like.numel() * like.element_size())
        snap.valid = False  # until hand_off: a source never handed is never written
        self._handed.append(snap)
        return snap

    def defer(self, name: str, src: torch.Tensor) -> DeferredSnap:
        """A snapshot of ``src`` to be copied off the training thread."""
        hit = self._by_id.get(id(src))
        if hit is not None and hit.src is src and hit.version == src._version:
            if name != hit.name:
                hit.aliases = [*(hit.aliases or ()), name]
            return hit
        snap = DeferredSnap(name, src, src._version, src.numel() * src.element_size())
        self._handed.append(snap)
        self._by_id[id(src)] = snap
        self._push(snap)
        return snap

    def hand_off(self, snap: DeferredSnap, src: torch.Tensor) -> None:
        """Give a :meth:`placeholder` its source."""
        snap.src, snap.version, snap.valid = src, src._version, True
        self._push(snap)

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
        with self._cond:
            self._queue.extend(batch)
            self._cond.notify()
        if self._thread is None:
            self._start()

    def fence(self, in_step: bool) -> None:
        """Make every copy handed off so far complete and checked (see the module docs).

        ``in_step``: an optimizer step or the end of a backward pass, i.e. a point that comes
        before the script's own in-place updates; the learning step's probes are judged here.
        """
        handed, probes = self._handed, self._probes
        if not handed and not probes:
            return
        stolen, self._batch, self._batch_bytes = self._batch, [], 0
        with self._cond:
            stolen.extend(self._queue)
            self._queue.clear()
        for snap in stolen:
            self._copy(snap)
            self.copied_on_thread += 1
        if handed:
            with self._cond:
                while self._busy:
                    self._cond.wait()
        self._handed = []
        for snap in handed:
            src = snap.src
            if not snap.valid or src is None or snap.tensor is None or src._version != snap.version:
                self._invalidate(snap)
            snap.src = None
        self._by_id.clear()
        if in_step:
            self._probes = []
            state = self.state
            for name, src, version in probes:
                if state.get(name, LEARNING) == LEARNING:
                    state[name] = DEFERRED if src._version == version else ON_THREAD

    def step_end(self) -> None:
        """The step's last fence; probes not judged by an in-step fence are forgotten (their
        names stay in the learning state: copied on the thread, as before)."""
        self.fence(in_step=False)
        self._probes = []

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

    def _copy(self, snap: DeferredSnap) -> None:
        src = snap.src
        if src is None:
            return
        key = (tuple(src.shape), src.dtype)
        alloc = self._alloc
        try:
            buf = self._pool.take(key, snap.nbytes, lambda: alloc(key[0], key[1]))
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
                snap = queue.popleft()
                self._busy = True
            try:
                self._copy(snap)
                self.copied_off_thread += 1
            except Exception:  # never kill the thread: the fence finds the copy missing
                snap.valid = False
            finally:
                with cond:
                    self._busy = False
                    cond.notify_all()


def deferral_possible() -> bool:
    """Whether a hook may defer its copies here: not switched off (``MURPHY_HOOK_DEFERRED_COPY=0``),
    torch has the fences (>= 2.1: post-accumulate-grad hooks and the global optimizer step
    pre-hook), and the process may use a second core: on one core the copier adds thread
    switches and takes nothing off the training thread's core (benchmarks/writer_throughput.py)."""
    if os.environ.get("MURPHY_HOOK_DEFERRED_COPY", "1") == "0":
        return False
    if not (hasattr(torch.Tensor, "register_post_accumulate_grad_hook")
            and hasattr(torch_optimizer, "register_optimizer_step_pre_hook")):
        return False
    try:
        cores = len(os.sched_getaffinity(0))  # the affinity mask, where the OS has one
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return cores > 1
