"""The PyTorch adapter: smdebug's ``smdebug.pytorch.Hook`` API on top of :class:`BaseHook`.

This module and its backend (:mod:`murphy.hook.torch_backend`) are the only murphy modules
that import torch. Names written (smdebug's):

* parameters ``<RootClass>_<param_name>`` (e.g. ``Net_fc1.weight``), saved at the root module's
  forward-pre-hook, i.e. the values *before* this step's optimizer update;
* gradients ``gradient/<RootClass>_<param_name>`` (``Tensor.register_hook``);
* module inputs/outputs ``<module_name>_input_<i>`` / ``<module_name>_output_<i>`` with names
  from ``named_modules()`` (the root is its class name: ``Net_output_0``), only when a collection
  matches;
* ``register_loss(m)`` → ``<LossClass>_output_0``; ``record_tensor_value(n, t)`` →
  ``<n>_output_0``; ``save_scalar(n, v)`` → ``scalar/<n>``;
* ``register_optimizer(opt)`` → ``<OptClass>_<i>_<state key>`` (``i``: the parameter's position
  in ``opt.param_groups``) in ``optimizer_variables``. Parameter *names* are not used here
  because smdebug's ``weights`` regex would claim every name containing "weight".
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Callable
from typing import Any

import torch
from torch.optim import optimizer as torch_optimizer

from murphy.core.collection import CollectionKeys
from murphy.core.reduction_config import ReductionConfig
from murphy.core.save_config import SaveConfig
from murphy.hook.base import BaseHook
from murphy.hook.callback_plan import CallbackPlan
from murphy.hook.config import HookConfig, hook_from_config
from murphy.hook.guard import guarded
from murphy.hook.torch_backend import TorchBackend
from murphy.hook.torch_deferred import DeferredCopies
from murphy.hook.torch_params import GradPlan, ParamPlan
from murphy.hook.torch_util import (
    copier_wanted,
    deferral_possible,
    dist_rank_world,
    forget_empty_grad_hooks,
    optimizer_fence,
    optimizer_tensors,
    tensors_of,
)
from murphy.hook.writer import Record
from murphy.hook.writer_process import writer_process_for
from murphy.storage import ObjectStore


class Hook(BaseHook):
    """smdebug's PyTorch hook: ``hook.register_module(model)`` and train as usual."""

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
        rank, world = dist_rank_world()
        backend = TorchBackend()
        # Set before BaseHook's constructor: its atexit close() may run on a half-built hook.
        self._deferred: DeferredCopies | None = None
        # A backward's deferred gradients, saved at its end (set before BaseHook's constructor,
        # as _deferred).
        self._grad_plan = GradPlan()
        self._roots: set[int] = set()
        super().__init__(
            out_dir, dry_run, reduction_config, save_config, include_regex, include_collections,
            save_all, include_workers, backend=backend, rank=rank, world_size=world, **kwargs,
        )
        # Snapshot copies off the training thread, where they can help (torch_util.deferral_possible).
        if self._writes and deferral_possible():
            self._deferred = backend.deferred_copies()
            # ... and the encoding and files out of the process, where it can (writer_process).
            process = writer_process_for(self.store, self.worker)
            if process is not None:
                backend.use_arena(process.arena)
                self._writer.use_process(process)
            self._deferred.background = copier_wanted(process is not None)
        # While _grad saves: the gradient is copied on the training thread (see _snapshot).
        self._copy_here = False
        self._backward_fence_queued = False
        self._setup_tensorboard(out_dir, export_tensorboard, tensorboard_dir)
        self._module_names: dict[int, str] = {}
        self._params: list[tuple[str, torch.nn.Parameter]] = []
        self._param_ids: dict[int, int] = {}
        self._optimizers: list[torch.optim.Optimizer] = []
        self._io_modules: list[torch.nn.Module] = []
        self._grad_params: list[tuple[str, torch.nn.Parameter]] = []
        # Forward and gradient callbacks exist only during steps that may save, and only where
        # they can save (murphy.hook.callback_plan): a module with a forward hook leaves torch's
        # fast call path, which costs more than the hook itself.
        self._handles: list[Any] = []
        self._plan = CallbackPlan(self.collections)
        self._callback_key: Any = None
        # The modules that save nothing under the current key (CallbackPlan.silent).
        self._silent: frozenset[int] = frozenset()
        self._param_plan = ParamPlan()

    @classmethod
    def create_from_json_file(cls, json_file_path: str | os.PathLike[str] | None = None) -> Hook:
        """A hook configured by ``debughookconfig.json`` (default path: see :class:`HookConfig`)."""
        return cls.from_config(HookConfig.load(json_file_path))

    @classmethod
    def from_config(cls, cfg: HookConfig, **kwargs: Any) -> Hook:
        """A hook configured by a parsed :class:`HookConfig`."""
        return hook_from_config(cls, cfg, **kwargs)

    # ---- registration ----------------------------------------------------------------------

    @guarded
    def register_module(self, module: torch.nn.Module) -> None:
        """Capture ``module``'s parameters, gradients and (when asked) layer inputs/outputs."""
        if not isinstance(module, torch.nn.Module):
            raise TypeError(f"register_module needs a torch.nn.Module, got {type(module).__name__}")
        root = type(module).__name__
        for name, sub in module.named_modules():
            self._add_io_module(sub, root if name == "" else name)
        # The only callback present on every step: it counts steps and (un)installs the others.
        module.register_forward_pre_hook(self._forward_pre_hook)
        self._roots.add(id(module))
        for pname, param in module.named_parameters():
            full = f"{root}_{pname}"
            self._param_ids[id(param)] = len(self._params)
            self._params.append((full, param))
            if param.requires_grad:
                self._grad_params.append(("gradient/" + full, param))
        self._param_plan.invalidate()
        self._grad_plan.invalidate()
        self._refresh_callbacks()

    register_hook = register_module

    @guarded
    def register_loss(self, loss_module: torch.nn.Module) -> None:
        """Save the loss module's output as ``<LossClass>_output_0``."""
        self._add_io_module(loss_module, type(loss_module).__name__)
        self._refresh_callbacks()

    @guarded
    def register_optimizer(self, optimizer: torch.optim.Optimizer) -> None:
        """Save the optimizer's state tensors in ``optimizer_variables`` (see module docs)."""
        self._optimizers.append(optimizer)
        prefix = "^" + re.escape(type(optimizer).__name__) + r"_\d+_"
        self.get_collection(CollectionKeys.OPTIMIZER_VARIABLES).include(prefix)

    @guarded
    def record_tensor_value(self, tensor_name: str, tensor_value: torch.Tensor) -> None:
        """Save a functional loss (or any tensor) as ``<tensor_name>_output_0``."""
        self._save_torch(f"{tensor_name}_output_0", tensor_value)

    # ---- callbacks -------------------------------------------------------------------------

    def _forward_pre_hook(self, module: torch.nn.Module, inputs: Any) -> None:
        # BaseHook._begin_step's quiet path, inlined: this runs at every step, with cold caches.
        quiet = self._quiet
        if quiet:
            self._quiet = quiet - 1
            self.step += 1
            self._mode_step += 1
            return
        if self.guard.disabled or self._closed:
            self._drop_callbacks()
            return
        self._start_step()

    @guarded
    def _start_step(self) -> None:
        self._begin_full_step()
        self._grad_plan.clear()
        self._backward_fence_queued = False
        if not self._saving:
            return
        if self._plan.learning or self._plan.key(self._due, self._step_mode) != self._callback_key:
            self._refresh_callbacks()
        deferred = self._deferred
        if deferred is not None:
            deferred.early = True  # what the optimizer changes: fenced at its step
        try:
            self._param_plan.save(self._callback_key, self._params, deferred, self._save_torch, self._records,
                                  self.collections.save_plans)
            for opt in self._optimizers:
                for name, value in optimizer_tensors(opt):
                    self._save_torch(name, value)
        finally:
            if deferred is not None:
                deferred.early = False
        if deferred is not None:
            deferred.kick()  # the weights' copies run while forward and backward do

    def _saving_changed(self, saving: bool) -> None:
        self._refresh_callbacks()

    def _add_io_module(self, module: torch.nn.Module, name: str) -> None:
        if id(module) not in self._module_names:
            self._io_modules.append(module)
        self._module_names[id(module)] = name

    def _refresh_callbacks(self) -> None:
        """Install the forward and gradient callbacks while saving, remove them otherwise."""
        self._drop_callbacks()
        if not self._saving:
            return
        plan, due = self._plan, self._due
        self._callback_key = key = plan.key(due, self._step_mode)
        silent = self._silent = plan.silent(key)
        hooked = [m for m in self._io_modules if id(m) not in silent]
        if hooked:  # a root's forward hook also ends its forward's hand-offs (see _forward_hook)
            hooked += [m for m in self._io_modules if id(m) in silent and id(m) in self._roots]
        handles = self._handles
        for module in hooked:
            handles.append(module.register_forward_hook(self._forward_hook))
        for name, param in self._grad_params:
            # A parameter frozen after registration has no gradient to save (and refuses hooks).
            if param.requires_grad and plan.may_save(due, name):
                handles.append(param.register_hook(self._gradient_hook(name, param)))  # type: ignore[no-untyped-call]
        if self._deferred is not None:
            # Every optimizer's step() fences first: the copies must finish before it writes.
            handles.append(torch_optimizer.register_optimizer_step_pre_hook(optimizer_fence(self)))

    def _drop_callbacks(self) -> None:
        # Also runs unguarded (after the hook was disabled): must never raise into training.
        handles, self._handles = self._handles, []
        if not handles:
            return
        for handle in handles:
            with contextlib.suppress(Exception):
                handle.remove()
        for _, param in self._grad_params:
            with contextlib.suppress(Exception):
                forget_empty_grad_hooks(param)

    @guarded
    def _forward_hook(self, module: torch.nn.Module, inputs: Any, outputs: Any) -> None:
        if not self._is_saving():
            return
        if id(module) in self._silent:  # a root hooked only to end its forward's hand-offs
            if self._deferred is not None:
                self._deferred.kick()
            return
        name = self._module_names.get(id(module), type(module).__name__)
        ins, outs = tensors_of(inputs), tensors_of(outputs)
        self._plan.observe(id(module), name, len(ins), len(outs), self._due)
        for i, t in enumerate(ins):
            if t is not None:
                self._save_torch(f"{name}_input_{i}", t)
        for i, t in enumerate(outs):
            if t is not None:
                self._save_torch(f"{name}_output_{i}", t)
        if self._deferred is not None and id(module) in self._roots:
            self._deferred.kick()  # the end of a forward: its outputs are copied during backward

    def _gradient_hook(self, name: str, param: torch.nn.Parameter) -> Callable[[torch.Tensor], None]:
        deferred = self._deferred
        if deferred is None:
            def hook(grad: torch.Tensor) -> None:
                self._grad(name, grad, param)

            return hook
        fresh, at_hook, wants = self._grad_plan.fresh, self._grad_plan.at_hook, deferred.wants

        def deferred_hook(grad: torch.Tensor) -> None:
            # A deferred gradient that lands in a param.grad that is None: noted, and saved from
            # param.grad with the others at the backward's end (GradPlan). Nothing else runs here.
            if param.grad is None and wants(name) and name not in at_hook:
                fresh.append((name, param))
                if not self._backward_fence_queued:
                    self._queue_backward_fence()
            else:  # learning, added to an existing param.grad, or never accumulated
                self._grad(name, grad, param)

        return deferred_hook

    @guarded
    def _grad(self, name: str, grad: torch.Tensor, param: torch.nn.Parameter) -> None:
        # The gradient itself, copied here (see _snapshot): without deferred copies, while its
        # name is learned, or when it is added to an existing param.grad.
        if not self._is_saving():
            return
        deferred = self._deferred
        if deferred is not None:
            if not self._backward_fence_queued:
                self._queue_backward_fence()
            if param.grad is None and not deferred.wants(name) and name not in self._grad_plan.at_hook:
                self._grad_plan.watch.append((name, param))  # learning: probed in param.grad
        self._copy_here = True
        try:
            self._save_torch(name, grad)
        finally:
            self._copy_here = False

    @guarded
    def _queue_backward_fence(self) -> None:
        # Once per backward pass: see _backward_fence.
        if not self._backward_fence_queued:
            torch.autograd.Variable._execution_engine.queue_callback(self._backward_fence)
            self._backward_fence_queued = True

    @guarded
    def _backward_fence(self) -> None:
        # queue_callback's: the end of a backward pass. Its deferred gradients are saved from
        # param.grad (GradPlan), then a fence only where one is needed (DeferredCopies.backward_end).
        self._backward_fence_queued = False
        plan, deferred = self._grad_plan, self._deferred
        if deferred is not None and (plan.fresh or plan.watch) and self._is_saving():
            plan.end_backward(self._callback_key, deferred, self._save_torch, self._records,
                              self.collections.save_plans, self.step)
        else:
            plan.clear()
        if deferred is not None:
            try:
                deferred.backward_end()
            except Exception as exc:  # never into backward()
                self.guard.trip(exc, "deferred copy fence")

    def _optimizer_fence(self) -> None:
        """``optimizer.step()``'s pre-hook (torch_util.optimizer_fence): the copies handed off so
        far complete before the optimizer writes the weights."""
        deferred = self._deferred
        if deferred is None:
            return
        try:
            deferred.fence(True, optimizer=True)
        except Exception as exc:  # never into optimizer.step()
            self.guard.trip(exc, "deferred copy fence")

    def _snapshot(
        self, name: str, value: Any, raw: bool, shape: bool, reductions: tuple[tuple[str, bool], ...]
    ) -> None:
        deferred = self._deferred
        if deferred is None or not raw or reductions or not self._writes or not TorchBackend.deferrable(value):
            super()._snapshot(name, value, raw, shape, reductions)
            return
        here = self._copy_here
        if here or not deferred.wants(name):
            # A gradient added to an existing param.grad (_grad), or a name still being learned
            # (watched until the step's end): copied here.
            super()._snapshot(name, value, raw, shape, reductions)
            if not here:
                deferred.probe(name, value)
            return
        self._records.append(Record(name, deferred.defer(name, value), tuple(value.shape) if shape else None))

    def _end_step(self) -> None:
        if self._deferred is not None and self._records:  # its copies: done, checked, then queued
            self._deferred.step_end()
        super()._end_step()

    def close(self) -> None:
        """As :meth:`BaseHook.close`, then stop the copier thread."""
        super().close()
        self._grad_plan.clear()
        if self._deferred is not None:
            try:
                self._deferred.close()
            except Exception as exc:
                self.guard.trip(exc, "close")

    def _save_torch(self, name: str, value: Any) -> None:
        # smdebug never writes zero-size tensors.
        if isinstance(value, torch.Tensor) and value.numel() == 0:
            return
        self._save(name, value)


_HOOK: Hook | None = None


def get_hook(
    json_config_path: str | os.PathLike[str] | None = None, create_if_not_exists: bool = False
) -> Hook | None:
    """The process-wide hook; with ``create_if_not_exists`` it is built from the JSON config
    when that file exists (None otherwise, like smdebug outside SageMaker)."""
    global _HOOK
    if _HOOK is None and create_if_not_exists:
        path = json_config_path if json_config_path is not None else HookConfig.default_path()
        if os.path.exists(path):
            _HOOK = Hook.create_from_json_file(path)
    return _HOOK


def set_hook(hook: Hook | None) -> None:
    """Replace the process-wide hook (tests; or to share a hand-built hook with libraries)."""
    global _HOOK
    _HOOK = hook
