"""One interpreter's half of benchmarks/writer_throughput.py.

Trains one CNN (its weights + gradients are ~2.5 MB, its layer outputs another ~2.2 MB per step at
batch 16) pinned to ``--cores`` CPU cores, in blocks of steps that take turns: no hook, then each
variant (``--variants``), repeated ``--rounds`` times, so load drifts of the shared machine hit every
variant alike. A variant saves every step:

* ``murphy-wg`` / ``murphy-wgo``: murphy's PyTorch hook, weights+biases+gradients (``wg``), plus
  the layer outputs (``wgo``);
* ``smdebug-wg`` / ``smdebug-wgo``: the same with the real smdebug 1.0.34 (run by its venv's
  python; this file then never imports murphy). Layer outputs are selected by ``include_regex``
  (smdebug's "outputs" collection saves nothing on torch 2.x), so both write the same bytes;
* ``murphyT-wg`` / ``murphyT-wgo``: murphy's hook with ``MURPHY_HOOK_DEFERRED_COPY=0`` (every
  snapshot copied on the training thread, as before the deferred copies): the A/B of that change;
* ``murphyW-*``: the writer thread encodes and writes (``MURPHY_HOOK_WRITER_PROCESS=0``);
  ``murphyC-*``: a copier thread beside the writer process (``MURPHY_HOOK_COPIER=1``);
* ``raw-wg`` / ``raw-wgo``: the floor: the bytes murphy's hook wrote for that step (captured once,
  before timing), written with one ``write`` per file into the same layout (one ``mkdir`` for the
  step's events directory, then ``open``/``write``/``close`` of the events file and the index file),
  on the training thread. No encoding, no copy, no rename.

Per block it records the process CPU time (``getrusage``: all threads, user + system), the training
thread's CPU (``time.thread_time``) and wall time, the context switches, and the bytes the variant
left under its out_dir (files are deleted between blocks, outside the timed part). A block of a
hooked variant ends with ``hook.flush()`` (murphy) or ``hook`` step end (smdebug closes its files at
every step), inside the CPU measurement, so all of a block's writing is charged to it.

``--phases`` adds one instrumented murphy run (not used for the deltas: wrapping costs time): the
thread CPU spent in each stage of murphy's writing path.

Prints one JSON document.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from _bench_cnn import Net, hook_api

BATCH = 16
COLLECTIONS = {
    "wg": ["weights", "biases", "gradients"],
    "wgo": ["weights", "biases", "gradients"],
}
# Layer outputs are selected by name (smdebug 1.0.34's "outputs" collection saves nothing on
# torch 2.x, its include_regex does; both libraries then write the same tensors and bytes).
OUTPUT_REGEX = {"wg": None, "wgo": [r"_output_\d+$"]}
# murphy's variants and the switches each sets while its hook is built: murphyT, every snapshot
# copied on the training thread (no deferred copies); murphyW, deferred copies but the writer
# thread encodes and writes (no writer process); murphyC, the copier thread forced on (by default
# a hook with a writer process on two cores has the fences copy, murphy.hook.torch_util.copier_wanted).
MURPHY_ENV: dict[str, dict[str, str]] = {
    "murphy": {}, "murphyT": {"MURPHY_HOOK_DEFERRED_COPY": "0"}, "murphyW": {"MURPHY_HOOK_WRITER_PROCESS": "0"},
    "murphyC": {"MURPHY_HOOK_COPIER": "1"},
}


def _walk_size(root: str) -> int:
    total = 0
    for dirpath, _, files in os.walk(root):
        for f in files:
            total += os.path.getsize(os.path.join(dirpath, f))
    return total


class Job:
    """A model, its data and optimizer, and for ``variant`` (``impl-tensors``) a hook or raw sink."""

    def __init__(self, variant: str | None, scratch: str, raw_files: dict[str, list[tuple[str, bytes]]]) -> None:
        torch.manual_seed(0)
        gen = torch.Generator().manual_seed(1)
        self.data = [(torch.randn(BATCH, 1, 28, 28, generator=gen), torch.randint(0, 10, (BATCH,), generator=gen))
                     for _ in range(8)]
        self.model, self.loss_fn = Net(c1=16, c2=32, hidden=384), nn.CrossEntropyLoss()
        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.01)
        self.i = 0
        self.hook: Any = None
        self.impl, self.tensors = (variant.split("-") if variant else (None, None))
        self.out_dir = tempfile.mkdtemp(prefix=f"{variant or 'plain'}-", dir=scratch) + "/run"
        self.raw = raw_files.get(self.tensors or "") if self.impl == "raw" else None
        self.raw_cpu = 0.0
        if self.impl in (*MURPHY_ENV, "smdebug"):
            Hook, SaveConfig, ReductionConfig, modes = hook_api("smdebug" if self.impl == "smdebug" else "murphy")
            env = MURPHY_ENV.get(self.impl or "", {})
            os.environ.update(env)
            self.hook = Hook(out_dir=self.out_dir, save_config=SaveConfig(save_interval=1),
                             reduction_config=ReductionConfig(save_raw_tensor=True),
                             include_collections=COLLECTIONS[self.tensors or "wg"],
                             include_regex=OUTPUT_REGEX[self.tensors or "wg"])
            for key in env:
                os.environ.pop(key, None)
            process = getattr(getattr(self.hook, "_writer", None), "process", None)
            if process is not None:
                WRITER_PROCESSES.append(process)
            self.hook.register_module(self.model)
            self.hook.register_loss(self.loss_fn)
            self.hook.set_mode(modes.TRAIN)
        elif self.impl == "raw":
            os.makedirs(os.path.join(self.out_dir, "index", "000000000"))
            os.makedirs(os.path.join(self.out_dir, "events"))

    def step(self) -> None:
        x, y = self.data[self.i % len(self.data)]
        loss = self.loss_fn(self.model(x), y)
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()
        if self.raw is not None:
            self._raw_write(self.i)
        self.i += 1

    def _raw_write(self, step: int) -> None:
        # The floor: the layout's one new directory per step, then one write per file.
        t0 = time.thread_time()
        try:
            self._raw_files(step)
        finally:
            self.raw_cpu += time.thread_time() - t0

    def _raw_files(self, step: int) -> None:
        os.mkdir(os.path.join(self.out_dir, "events", f"{step:012d}"))
        for pattern, data in self.raw or ():
            fd = os.open(os.path.join(self.out_dir, pattern.format(step=step)), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.write(fd, data)
            os.close(fd)

    def end_block(self) -> None:
        if self.hook is not None and self.impl in MURPHY_ENV:
            self.hook.flush()

    def harvest(self) -> int:
        """Bytes written under out_dir so far; deletes the step files (not timed)."""
        size = 0
        for sub in ("events", "index"):
            path = os.path.join(self.out_dir, sub)
            if os.path.isdir(path):
                size += _walk_size(path)
                for entry in os.listdir(path):
                    shutil.rmtree(os.path.join(path, entry), ignore_errors=True)
        if self.impl == "raw":
            os.makedirs(os.path.join(self.out_dir, "index", "000000000"), exist_ok=True)
            os.makedirs(os.path.join(self.out_dir, "events"), exist_ok=True)
        return size

    def close(self) -> None:
        if self.hook is not None:
            self.hook.close()


class CallbackClock:
    """Thread CPU spent inside every torch hook callback (both libraries register theirs through
    these three methods), so a variant's own CPU can be measured directly, not only as a
    difference of two blocks."""

    #: The kinds of callback timed, as :attr:`by_kind` names them.
    KINDS = ("forward-pre", "forward", "tensor", "post-accumulate", "optimizer-pre", "end-of-backward")

    def __init__(self) -> None:
        self.acc = 0.0
        #: Thread CPU seconds and calls per kind of callback (writer_thread_share.py --callbacks).
        self.by_kind: dict[str, float] = dict.fromkeys(self.KINDS, 0.0)
        self.calls: dict[str, int] = dict.fromkeys(self.KINDS, 0)

    def install(self) -> None:
        for owner, attr, kind in ((nn.Module, "register_forward_pre_hook", "forward-pre"),
                                  (nn.Module, "register_forward_hook", "forward"),
                                  (torch.Tensor, "register_hook", "tensor")):
            orig = getattr(owner, attr)

            def patched(obj: Any, hook: Callable[..., Any], *a: Any, _orig: Any = orig, _kind: str = kind,
                        **kw: Any) -> Any:
                return _orig(obj, self._wrap(hook, _kind), *a, **kw)

            setattr(owner, attr, patched)
        # murphy's deferred copies also run in post-accumulate-grad hooks, an optimizer step
        # pre-hook and an end-of-backward callback (torch >= 2.1; smdebug uses none of them).
        if hasattr(torch.Tensor, "register_post_accumulate_grad_hook"):
            orig_post = torch.Tensor.register_post_accumulate_grad_hook

            def post(obj: Any, hook: Callable[..., Any]) -> Any:
                return orig_post(obj, self._wrap(hook, "post-accumulate"))  # type: ignore[no-untyped-call]

            torch.Tensor.register_post_accumulate_grad_hook = post  # type: ignore[method-assign]
        import torch.optim.optimizer as optim_mod
        if hasattr(optim_mod, "register_optimizer_step_pre_hook"):
            orig_opt = optim_mod.register_optimizer_step_pre_hook

            def opt_pre(hook: Callable[..., Any]) -> Any:
                return orig_opt(self._wrap(hook, "optimizer-pre"))

            optim_mod.register_optimizer_step_pre_hook = opt_pre
        engine, clock = torch.autograd.Variable._execution_engine, self

        class Engine:
            """The autograd engine, with callbacks queued for the end of backward timed."""

            def __getattr__(self, name: str) -> Any:
                return getattr(engine, name)

            def queue_callback(self, fn: Callable[[], None]) -> None:
                engine.queue_callback(clock._wrap(fn, "end-of-backward"))

        torch.autograd.Variable._execution_engine = Engine()  # type: ignore[assignment]

    def _wrap(self, fn: Callable[..., Any], kind: str) -> Callable[..., Any]:
        by_kind, calls = self.by_kind, self.calls

        def timed(*args: Any, **kwargs: Any) -> Any:
            t0 = time.thread_time()
            try:
                return fn(*args, **kwargs)
            finally:
                spent = time.thread_time() - t0
                self.acc += spent
                by_kind[kind] += spent
                calls[kind] += 1

        return timed


CALLBACKS = CallbackClock()


#: murphy's writer processes (murphy.hook.writer_process): their CPU is the hook's too.
WRITER_PROCESSES: list[Any] = []
_TICK = os.sysconf("SC_CLK_TCK")


def _child_cpu() -> float:
    total = 0.0
    for process in WRITER_PROCESSES:
        pid = process.pid
        if pid is None:
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / _TICK  # utime + stime
    return total


def _cpu() -> float:
    """This process's CPU (every thread) plus its writer processes'."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime + _child_cpu()


def _switches() -> int:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_nvcsw + r.ru_nivcsw


def block(job: Job, steps: int) -> dict[str, float]:
    """One timed block of ``steps`` steps of ``job``."""
    c0, t0, w0, s0 = _cpu(), time.thread_time(), time.perf_counter(), _switches()
    cb0, raw0 = CALLBACKS.acc, job.raw_cpu
    kinds0, calls0 = dict(CALLBACKS.by_kind), dict(CALLBACKS.calls)
    for _ in range(steps):
        job.step()
    w_steps = time.perf_counter() - w0
    job.end_block()
    cpu, train = _cpu() - c0, time.thread_time() - t0
    # direct: this variant's own CPU: its callbacks and raw writes on the training thread, plus
    # every other thread (the writer threads) over the block.
    direct = (CALLBACKS.acc - cb0) + (job.raw_cpu - raw0) + max(0.0, cpu - train)
    out = {
        "direct_cpu_ms": direct * 1e3,
        "dropped": float(job.hook.steps_dropped) if job.impl in MURPHY_ENV else 0.0,
        "cpu_ms": (_cpu() - c0) * 1e3, "train_cpu_ms": (time.thread_time() - t0) * 1e3,
        "train_wall_ms": w_steps * 1e3, "wall_ms": (time.perf_counter() - w0) * 1e3,
        "switches": float(_switches() - s0),
    }
    for kind in CallbackClock.KINDS:
        out[f"cb {kind} ms"] = (CALLBACKS.by_kind[kind] - kinds0[kind]) * 1e3
        out[f"cb {kind} calls"] = float(CALLBACKS.calls[kind] - calls0[kind])
    out["bytes"] = float(job.harvest())
    return out


def capture_raw(scratch: str, steps: int) -> dict[str, list[tuple[str, bytes]]]:
    """The files murphy's hook writes for one step of each tensor set (the raw floor's bytes)."""
    out: dict[str, list[tuple[str, bytes]]] = {}
    for tensors in COLLECTIONS:
        job = Job(f"murphy-{tensors}", scratch, {})
        for _ in range(steps):
            job.step()
        job.close()
        step = steps - 1
        files = []
        for sub, name in (("events", f"{step:012d}/{step:012d}_worker_0.tfevents"),
                          ("index", f"000000000/{step:012d}_worker_0.json")):
            with open(os.path.join(job.out_dir, sub, name), "rb") as f:
                data = f.read()
            pattern = f"{sub}/{name}".replace(f"{step:012d}", "{step:012d}")
            files.append((pattern, data))
        out[tensors] = files
        shutil.rmtree(os.path.dirname(job.out_dir), ignore_errors=True)
    return out


class PhaseClock:
    """Thread CPU per stage of murphy's writing path, by wrapping the functions that do it."""

    def __init__(self) -> None:
        self.acc: dict[str, float] = {}
        self.calls: dict[str, int] = {}
        self._undo: list[Callable[[], None]] = []
        self._local = threading.local()

    def wrap(self, owner: Any, attr: str, phase: str, thread: str | None = None) -> None:
        orig = getattr(owner, attr)
        clock = self

        def timed(*args: Any, **kwargs: Any) -> Any:
            if thread is not None and threading.current_thread().name != thread:
                return orig(*args, **kwargs)
            # Nested phases are charged to the innermost one only.
            outer = getattr(clock._local, "phase", None)
            t0 = time.thread_time()
            clock._local.phase = phase
            try:
                return orig(*args, **kwargs)
            finally:
                dt = time.thread_time() - t0
                clock._local.phase = outer
                clock.acc[phase] = clock.acc.get(phase, 0.0) + dt
                clock.calls[phase] = clock.calls.get(phase, 0) + 1
                if outer is not None:
                    clock.acc[outer] = clock.acc.get(outer, 0.0) - dt

        setattr(owner, attr, timed)
        self._undo.append(lambda: setattr(owner, attr, orig))

    def restore(self) -> None:
        for undo in reversed(self._undo):
            undo()


def phases(scratch: str, steps: int) -> dict[str, Any]:
    """One instrumented murphy-wgo run: thread CPU ms per step in each stage, and the writer total."""
    from murphy.hook import torch as mt
    from murphy.hook import writer as hw
    from murphy.storage import local as sl
    from murphy.tensorio import index as ti
    from murphy.tensorio import writer as tw

    clock = PhaseClock()
    clock.wrap(mt.TorchBackend, "snapshot", "copy off the device (training thread)")
    clock.wrap(mt.TorchBackend, "to_numpy", "to numpy (writer)")
    from murphy.hook import torch_deferred as td
    # Deferred snapshot copies: by the copier thread, or taken back by the training thread at a
    # fence (optimizer step, end of backward, step end) when the copier had not reached them.
    clock.wrap(td.DeferredCopies, "_copy", "deferred copy (copier thread)", thread="murphy-hook-copier")
    clock.wrap(td.DeferredCopies, "_copy", "deferred copy at a fence (training thread)", thread="MainThread")
    clock.wrap(tw, "encode_tensor_event_parts", "encoding (writer)")
    clock.wrap(tw, "frame_parts", "framing + length CRC (writer)")
    clock.wrap(ti.StepIndex, "to_json_bytes", "index JSON (writer)")
    for name in ("mkdir", "open", "write", "writev", "close", "replace", "fchmod", "unlink"):
        if hasattr(os, name):  # the files' system calls, on the writer thread only
            clock.wrap(os, name, f"os.{name} (writer)", thread="murphy-hook-writer")
    for attr in ("put", "put_parts"):
        if hasattr(sl.LocalObjectStore, attr):
            clock.wrap(sl.LocalObjectStore, attr, "store put, rest (writer)")
    writer_cpu: list[float] = []
    orig_run = hw.BackgroundWriter._run

    def run(self: Any) -> None:
        t0 = time.thread_time()
        try:
            orig_run(self)
        finally:
            writer_cpu.append(time.thread_time() - t0)

    hw.BackgroundWriter._run = run  # type: ignore[method-assign]
    try:
        job = Job("murphy-wgo", scratch, {})
        for _ in range(5):
            job.step()
        job.hook.flush()
        job.harvest()
        clock.acc.clear()
        clock.calls.clear()
        c0, t0 = _cpu(), time.thread_time()
        res = block(job, steps)
        train_cpu = time.thread_time() - t0
        total = _cpu() - c0
        job.close()
    finally:
        clock.restore()
        hw.BackgroundWriter._run = orig_run  # type: ignore[method-assign]
    return {
        "steps": steps, "mb_per_step": res["bytes"] / steps / 1e6,
        "phase_ms_per_step": {k: v * 1e3 / steps for k, v in sorted(clock.acc.items())},
        "calls_per_step": {k: v / steps for k, v in sorted(clock.calls.items())},
        "process_cpu_ms_per_step": total * 1e3 / steps, "train_thread_cpu_ms_per_step": train_cpu * 1e3 / steps,
        "writer_thread_cpu_ms_per_step": (writer_cpu[0] * 1e3 / (steps + 5)) if writer_cpu else None,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--variants", required=True, help="comma-separated, e.g. murphy-wg,raw-wg")
    ap.add_argument("--cores", type=int, default=1)
    ap.add_argument("--steps", type=int, default=25, help="steps per block")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--phases", action="store_true")
    args = ap.parse_args()
    cores = sorted(os.sched_getaffinity(0))[: args.cores]
    os.sched_setaffinity(0, cores)
    torch.set_num_threads(1)
    CALLBACKS.install()
    variants = args.variants.split(",")
    scratch = tempfile.mkdtemp(prefix="writer-bench-")
    try:
        raw = capture_raw(scratch, 3) if any(v.startswith("raw") for v in variants) else {}
        jobs = {v: Job(None if v == "plain" else v, scratch, raw) for v in ["plain", *variants]}
        for job in jobs.values():  # warm every job (allocator, hook caches, first files)
            block(job, 5)
        results: dict[str, list[dict[str, float]]] = {v: [] for v in jobs}
        order = list(jobs)
        for r in range(args.rounds):
            for v in order if r % 2 == 0 else reversed(order):
                results[v].append(block(jobs[v], args.steps))
        for job in jobs.values():
            job.close()
        out: dict[str, Any] = {"torch": torch.__version__, "cores": cores, "steps": args.steps, "blocks": results,
                               "python": sys.version.split()[0]}
        if args.phases:
            out["phases"] = phases(scratch, args.steps * 2)
        print(json.dumps(out))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
