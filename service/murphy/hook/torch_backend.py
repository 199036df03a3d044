"""The PyTorch tensor backend: snapshots (into reused staging buffers), reductions on the tensor's
own device, and the device fence. Imported only by :mod:`murphy.hook.torch`; with it, the only
murphy modules that import torch.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from murphy.hook.backend import NumpyBackend
from murphy.hook.shm_arena import SharedArena
from murphy.hook.staging import StagingPool
from murphy.hook.torch_deferred import DeferredCopies, DeferredSnap

_NUMPY = NumpyBackend()


class _Snap:
    """A host copy of a tensor, possibly still being copied from the device.

    ``pool_key`` is set while ``tensor`` is a buffer of the backend's staging pool, to give back
    once the step is written.
    """

    __slots__ = ("nbytes", "original_dtype", "pool_key", "tensor")

    def __init__(self, tensor: torch.Tensor, original_dtype: str | None,
                 pool_key: tuple[tuple[int, ...], torch.dtype] | None = None) -> None:
        self.tensor = tensor
        self.original_dtype = original_dtype
        self.nbytes = tensor.numel() * tensor.element_size()
        self.pool_key = pool_key


class TorchBackend:
    """Snapshots and reductions with torch ops on the tensor's own device."""

    def __init__(self) -> None:
        self._cuda_pending = False
        self._pool = StagingPool()
        # Copies taken during the current step, by tensor identity: one activation is usually
        # both a module's output and the next module's input. Entries keep the source alive so
        # ids stay unique, and record its version counter: an in-place change needs a new copy.
        self._step_copies: dict[int, tuple[torch.Tensor, int, _Snap]] = {}
        #: Where staging buffers come from when a writer process reads them (else private memory).
        self.arena: SharedArena | None = None

    def use_arena(self, arena: SharedArena) -> None:
        """Carve the staging buffers out of ``arena`` from now on (a writer process reads them)."""
        self.arena = arena

    def _alloc(self, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
        arena = self.arena
        if arena is not None:
            nbytes = math.prod(shape) * dtype.itemsize
            offset = arena.alloc(nbytes)
            if offset is not None:
                with torch.inference_mode(False):
                    raw = torch.frombuffer(arena.mm, dtype=torch.uint8, count=nbytes, offset=offset)
                    return raw.view(dtype).view(shape)
        return _empty(shape, dtype)

    def deferred_copies(self) -> DeferredCopies:
        """A copier thread (murphy.hook.torch_deferred) for the hook, which owns it (and fences it
        at every step's end), copying into this backend's staging buffers."""
        return DeferredCopies(self._pool, self._alloc)

    @staticmethod
    def deferrable(value: Any) -> bool:
        """True for a tensor the copier may copy: a CPU, strided, numpy-typed plain tensor with
        a version counter (the fence's check)."""
        return (isinstance(value, torch.Tensor) and value.device.type == "cpu" and value.layout == torch.strided
                and value.dtype != torch.bfloat16 and not value.is_inference()
                and type(value) in (torch.Tensor, torch.nn.Parameter))

    def is_tensor(self, value: Any) -> bool:
        return isinstance(value, torch.Tensor)

    def snapshot(self, value: Any) -> Any:
        if not isinstance(value, torch.Tensor):
            return _NUMPY.snapshot(value)
        # Inference tensors have no version counter: never shared.
        version = -1 if value.is_inference() else value._version
        if version >= 0:
            hit = self._step_copies.get(id(value))
            if hit is not None and hit[0] is value and hit[1] == version:
                return hit[2]
        t = value.detach()
        original = None
        if t.dtype == torch.bfloat16:
            # numpy has no bfloat16: widen (exactly) and tell the codec the original dtype.
            t, original = t.float(), "bfloat16"
        if original is None and t.device.type == "cpu" and type(t) is torch.Tensor and t.layout == torch.strided:
            snap = self._staged_copy(t)
        else:
            snap = _Snap(self._to_host(t, copy=original is None), original)
        if version >= 0:
            self._step_copies[id(value)] = (value, version, snap)
        return snap

    def _staged_copy(self, t: torch.Tensor) -> _Snap:
        """A copy of CPU tensor ``t`` in a reused, C-contiguous buffer (murphy.hook.staging)."""
        key = (tuple(t.shape), t.dtype)
        nbytes = t.numel() * t.element_size()
        buf = self._pool.take(key, nbytes, lambda: self._alloc(key[0], key[1]))
        try:
            buf.copy_(t)
        except RuntimeError:  # e.g. a buffer torch refuses to update here: a plain copy instead
            return _Snap(t.clone(), None)
        return _Snap(buf, None, key)

    def release(self, snaps: list[Any]) -> None:
        """Give the pooled buffers of a written (or dropped) step back (the writer thread)."""
        pool = self._pool
        for snap in snaps:
            if isinstance(snap, _Snap | DeferredSnap) and snap.pool_key is not None and snap.tensor is not None:
                key, snap.pool_key = snap.pool_key, None  # shared snaps appear more than once
                pool.give(key, snap.nbytes, snap.tensor)

    def reduce(self, value: Any, op: str, abs_: bool) -> Any:
        if not isinstance(value, torch.Tensor):
            return _NUMPY.reduce(value, op, abs_)
        t = value.detach()
        if t.dtype == torch.bfloat16:
            t = t.float()
        elif not t.is_floating_point() and not t.is_complex():
            t = t.double()
        if abs_:
            t = t.abs()
        return _Snap(self._to_host(_reduce(t, op), copy=False), None)

    def shape(self, value: Any) -> tuple[int, ...]:
        if isinstance(value, torch.Tensor):
            return tuple(int(d) for d in value.shape)
        return _NUMPY.shape(value)

    def fence(self) -> Callable[[], None] | None:
        self._step_copies.clear()
        if not self._cuda_pending:
            return None
        self._cuda_pending = False
        # Runs on the writer thread: waits for the non-blocking device→host copies of the step.
        return torch.cuda.synchronize

    def to_numpy(self, snap: Any) -> tuple[np.ndarray | None, str | None]:
        if isinstance(snap, _Snap):
            return snap.tensor.numpy(), snap.original_dtype
        if isinstance(snap, DeferredSnap):
            # None: the source changed before the fence checked the copy (not written).
            return (snap.tensor.numpy() if snap.valid and snap.tensor is not None else None), None
        return np.asarray(snap), None

    def _to_host(self, t: torch.Tensor, copy: bool) -> torch.Tensor:
        if t.device.type == "cpu":
            return t.clone() if copy else t
        if t.device.type == "cuda":
            self._cuda_pending = True
            return t.to("cpu", non_blocking=True)
        return t.to("cpu")


def _empty(shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    # A normal tensor even when the snapshot runs under torch.inference_mode(): an inference
    # tensor could not be copied into again outside it.
    with torch.inference_mode(False):
        return torch.empty(shape, dtype=dtype)


def _nan(t: torch.Tensor) -> torch.Tensor:
    # torch's unbiased std/var of one element is NaN *with a warning*; a user's ``-W error``
    # must not turn that into a disabled hook.
    return torch.full((), float("nan"), dtype=t.dtype, device=t.device)


_REDUCTIONS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "min": lambda t: t.min(),
    "max": lambda t: t.max(),
    "mean": lambda t: t.mean(),
    "std": lambda t: t.std() if t.numel() > 1 else _nan(t),
    "variance": lambda t: t.var() if t.numel() > 1 else _nan(t),
    "sum": lambda t: t.sum(),
    "prod": lambda t: t.prod(),
    "l1": lambda t: torch.linalg.vector_norm(t, ord=1),
    "l2": lambda t: torch.linalg.vector_norm(t, ord=2),
}


def _reduce(t: torch.Tensor, op: str) -> torch.Tensor:
    try:
        fn = _REDUCTIONS[op]
    except KeyError:
        raise ValueError(f"unknown reduction {op!r}") from None
    return fn(t)
