"""Small torch helpers of the PyTorch hook (murphy.hook.torch): the worker's rank, tensors of a
module's inputs/outputs, giving a parameter back its hook-free backward, and whether snapshot
copies may be deferred (murphy.hook.torch_deferred)."""

from __future__ import annotations

import os
import weakref
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch.optim import optimizer as torch_optimizer


def forget_empty_grad_hooks(param: torch.Tensor) -> None:
    """Give ``param`` back its hook-free backward once its last tensor hook was removed.

    ``Tensor.register_hook`` attaches a C++ wrapper around the ``_backward_hooks`` dict, and
    removing a handle only empties the dict: the wrapper stays and re-enters Python (GIL, tensor
    wrap, dict walk) in every later backward, 1-3 µs per parameter per step. Setting the
    attribute to None drops the wrapper (torch keeps exactly one, for that dict); a dict that
    still holds someone else's hook is left alone.
    """
    hooks = param._backward_hooks
    if hooks is not None and not hooks:
        param._backward_hooks = None


def dist_rank_world() -> tuple[int, int]:
    """The process group's rank and size; before ``init_process_group``, torchrun's ``RANK`` /
    ``WORLD_SIZE`` (a hook made first must not name every worker ``worker_0``)."""
    dist = torch.distributed
    if dist.is_available() and dist.is_initialized():
        return int(dist.get_rank()), int(dist.get_world_size())
    try:
        rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    except (KeyError, ValueError):
        return 0, 1
    return (rank, world) if 0 <= rank < world else (0, 1)


def tensors_of(value: Any) -> list[torch.Tensor | None]:
    """The tensors of a module's inputs or outputs (a tensor, or a list/tuple of them), None in
    place of anything else: smdebug numbers them by position."""
    items = value if isinstance(value, list | tuple) else [value]
    return [x if isinstance(x, torch.Tensor) else None for x in items]


def deferral_possible() -> bool:
    """Whether a hook may defer its copies here: not switched off (``MURPHY_HOOK_DEFERRED_COPY=0``),
    torch has the fences (2.1 or later, which ``register_post_accumulate_grad_hook`` marks: the
    global optimizer step pre-hook and the end-of-backward callback it was proven with), and the
    process may use a second core: on one core the copier adds thread switches and takes nothing
    off the training thread's core (benchmarks/writer_throughput.py)."""
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


def copier_wanted(writer_process: bool) -> bool:
    """Whether deferred copies get a copier thread (murphy.hook.torch_deferred), or are copied by
    the fences, one batched call each. ``MURPHY_HOOK_COPIER=1``/``0`` forces either; by default
    the copier runs unless a writer process takes the writes and the process has fewer than
    three cores: that process then keeps the second core busy, and a copier beside it made the
    training thread slower, not faster (benchmarks/writer_thread_share.py, docs/performance.md
    §1.W)."""
    forced = os.environ.get("MURPHY_HOOK_COPIER")
    if forced in ("0", "1"):
        return forced == "1"
    if not writer_process:
        return True
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return cores > 2


def optimizer_fence(hook: Any) -> Callable[..., None]:
    """torch's optimizer step pre-hook for ``hook``: its ``_optimizer_fence()`` (murphy.hook.torch)."""
    # A weak reference: torch's global hook list must not keep a dropped hook alive.
    ref = weakref.ref(hook)

    def fence(optimizer: Any, args: Any, kwargs: Any) -> None:
        h = ref()
        if h is not None:
            h._optimizer_fence()

    return fence


def optimizer_tensors(opt: torch.optim.Optimizer) -> Iterator[tuple[str, torch.Tensor]]:
    """``(<OptClass>_<i>_<state key>, tensor)`` of every tensor in ``opt``'s state (``i``: the
    parameter's position in ``opt.param_groups``), as smdebug names them."""
    cls = type(opt).__name__
    index = 0
    for group in opt.param_groups:
        for param in group["params"]:
            for key, value in opt.state.get(param, {}).items():
                if isinstance(value, torch.Tensor):
                    yield f"{cls}_{index}_{key}", value
            index += 1
