"""One side of benchmarks/hook_overhead_xgb.py, run in murphy's venv or the smdebug+xgboost venv.

usage: _xgb_bench_worker.py murphy|smdebug|raw OUT_DIR PLAN_JSON
PLAN_JSON: a list of {"config": "defaults"|"all10", "rows": N, "rounds": R} rows. ``defaults`` is
``Hook(out_dir)`` (metrics every 10 rounds); ``all10`` is every collection every 10 rounds, with
hyperparameters, validation data and a 500-row SHAP sample. ``raw`` (defaults rows only) is the
format's file-system floor: at the rounds murphy saves, the one new directory and the two files
(events, index) of smdebug's layout, with the bytes murphy's hook wrote for such a round (captured
once, before timing), one ``write`` each: no encoding, no temporary name and rename, no collections
file, manifest or end marker.

The worker builds every row's data, warms up, prints {"ready": ...} and then waits on stdin: each
``run I`` line trains, for every row, one plain and one hooked ``xgboost.train`` (plain first when
I is even, hooked first when odd) and prints one JSON line with, per run, the wall time, the CPU
time of the whole process (every thread: ``time.process_time``), the CPU time of the training
thread (``time.thread_time``) and, for the hooked run, the training thread's CPU time inside the
hook (construction, callbacks, ``close()``). ``quit`` ends it. The driver alternates the two
workers round by round, so plain, murphy and smdebug runs are interleaved in time.
"""

from __future__ import annotations

import gc
import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ALL = ["hyperparameters", "metrics", "losses", "predictions", "labels", "feature_importance",
       "average_shap", "full_shap", "trees"]
FEATURES = 20
PARAMS = {"objective": "binary:logistic", "max_depth": 6, "eta": 0.1, "nthread": 1, "eval_metric": "logloss"}


def _hook_class(impl: str) -> tuple[Any, Any]:
    if impl == "smdebug":
        import pkg_resources

        real = pkg_resources.get_distribution
        # The xgboost-cpu wheel's distribution is not called xgboost (docs/xgboost.md).
        pkg_resources.get_distribution = lambda n: real("xgboost-cpu") if n == "xgboost" else real(n)
        from smdebug import SaveConfig
        from smdebug.xgboost import Hook
    else:
        from murphy.hook import SaveConfig
        from murphy.hook.xgboost import Hook
    return Hook, SaveConfig


def _capture(out: Path, dtrain: Any, dval: Any, rounds: int) -> list[tuple[str, bytes]]:
    """The events and index files murphy's default hook writes at round 10 (the raw floor's bytes)."""
    import xgboost as xgb

    from murphy.hook.xgboost import Hook

    d = out / "raw-capture"
    shutil.rmtree(d, ignore_errors=True)
    xgb.train(PARAMS, dtrain, min(rounds, 11), evals=[(dtrain, "train"), (dval, "validation")],
              callbacks=[Hook(out_dir=str(d))], verbose_eval=False)
    files = []
    for rel in ("events/{s:012d}/{s:012d}_worker_0.tfevents", "index/000000000/{s:012d}_worker_0.json"):
        files.append((rel, (d / rel.format(s=10)).read_bytes()))
    shutil.rmtree(d, ignore_errors=True)
    return files


def main() -> None:
    impl, out, plan = sys.argv[1], Path(sys.argv[2]), json.loads(sys.argv[3])
    hook_cls, save_config = _hook_class("murphy" if impl == "raw" else impl)
    import xgboost as xgb

    class RawFloor(xgb.callback.TrainingCallback):
        """The format's file-system calls at murphy's saved rounds, and nothing else."""

        def __init__(self, out_dir: str, files: list[tuple[str, bytes]], interval: int = 10) -> None:
            super().__init__()
            self.out, self.files, self.interval, self.made = out_dir, files, interval, False

        def after_iteration(self, model: Any, epoch: int, evals_log: Any) -> bool:
            if epoch % self.interval:
                return False
            if not self.made:
                os.makedirs(f"{self.out}/index/000000000")
                os.makedirs(f"{self.out}/events")
                self.made = True
            os.mkdir(f"{self.out}/events/{epoch:012d}")
            for rel, data in self.files:
                fd = os.open(f"{self.out}/{rel.format(s=epoch)}", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                os.write(fd, data)
                os.close(fd)
            return False

    class Timed(xgb.callback.TrainingCallback):
        """The hook, built inside the timed run, with the training thread's CPU time in it counted."""

        def __init__(self, make: Any) -> None:
            super().__init__()
            t = time.thread_time()
            self.inner = make()
            self.spent = time.thread_time() - t

        def after_iteration(self, model: Any, epoch: int, evals_log: Any) -> bool:
            t = time.thread_time()
            stop = self.inner.after_iteration(model, epoch, evals_log)
            self.spent += time.thread_time() - t
            return bool(stop)

        def after_training(self, model: Any) -> Any:
            t = time.thread_time()
            model = self.inner.after_training(model)
            if hasattr(self.inner, "close"):
                self.inner.close()
            self.spent += time.thread_time() - t
            return model

    rows: list[dict[str, Any]] = []
    for spec in plan:
        n = int(spec["rows"])
        rng = np.random.default_rng(0)
        z = rng.normal(size=n + 1000)
        x = (z[:, None] + 0.5 * rng.normal(size=(n + 1000, FEATURES))).astype(np.float32)
        y = (z > 0).astype(np.float32)
        dtrain, dval = xgb.DMatrix(x[:n], label=y[:n]), xgb.DMatrix(x[n:], label=y[n:])
        # SHAP (pred_contribs) costs O(rows x trees x leaves x depth^2) in xgboost itself, the same
        # for both hooks: computed on 500 rows, as a user passes a sample as train_data.
        dshap = xgb.DMatrix(x[:500], label=y[:500])
        raw = _capture(out, dtrain, dval, int(spec["rounds"])) if impl == "raw" else []
        rows.append({**spec, "key": f"{spec['config']}@{n}", "dtrain": dtrain, "dval": dval, "dshap": dshap,
                     "raw": raw})

    def make(row: dict[str, Any], i: int) -> Any:
        d = out / f"{impl}-{row['key']}-{i}"
        shutil.rmtree(d, ignore_errors=True)
        if impl == "raw":
            return lambda: RawFloor(str(d), row["raw"])
        if row["config"] == "defaults":
            return lambda: hook_cls(out_dir=str(d))
        return lambda: hook_cls(out_dir=str(d), include_collections=ALL, save_config=save_config(save_interval=10),
                                hyperparameters=PARAMS, train_data=row["dshap"], validation_data=row["dval"])

    def run(row: dict[str, Any], factory: Any) -> dict[str, float]:
        gc.collect()
        c0, t0, w0 = time.process_time(), time.thread_time(), time.perf_counter()
        timed = Timed(factory) if factory is not None else None
        xgb.train(PARAMS, row["dtrain"], int(row["rounds"]), evals=[(row["dtrain"], "train"), (row["dval"], "validation")],
                  callbacks=[timed] if timed is not None else None, verbose_eval=False)
        w, c, t = time.perf_counter() - w0, time.process_time() - c0, time.thread_time() - t0
        return {"wall": w, "cpu": c, "thread": t, "in_hook": timed.spent if timed is not None else 0.0}

    def side_by_side(row: dict[str, Any], factory: Any) -> dict[str, float]:
        """xgboost.train's own loop for a plain and a hooked booster at once, taking turns round by
        round (order alternated): a load drift lands on both sides within milliseconds."""
        from xgboost.callback import CallbackContainer

        gc.collect()
        dtrain, evals = row["dtrain"], [(row["dtrain"], "train"), (row["dval"], "validation")]
        cpu: dict[str, float] = {"plain": 0.0, "hook": 0.0}
        wall: dict[str, float] = {"plain": 0.0, "hook": 0.0}
        state: dict[str, Any] = {}
        c0, t0 = time.process_time(), time.thread_time()

        def timed_part(side: str, fn: Any, *args: Any) -> None:
            t, w = time.thread_time(), time.perf_counter()
            fn(side, *args)
            cpu[side] += time.thread_time() - t
            wall[side] += time.perf_counter() - w

        def start(side: str) -> None:
            cbs = [Timed(factory)] if side == "hook" else []
            container = CallbackContainer(cbs, metric=None, output_margin=False)
            state[side] = (container, container.before_training(xgb.Booster(PARAMS, [dtrain] + [d[0] for d in evals])))

        def boost(side: str, epoch: int) -> None:
            container, bst = state[side]
            container.before_iteration(bst, epoch, dtrain, evals)
            bst.update(dtrain, iteration=epoch)
            container.after_iteration(bst, epoch, dtrain, evals)

        def finish(side: str) -> None:
            container, bst = state[side]
            container.after_training(bst).reset()

        for side in ("plain", "hook"):
            timed_part(side, start)
        for epoch in range(int(row["rounds"])):
            for side in ("plain", "hook") if epoch % 2 == 0 else ("hook", "plain"):
                timed_part(side, boost, epoch)
        for side in ("plain", "hook"):
            timed_part(side, finish)
        # Every thread but this one (a hook's writer) is charged to the hooked side in full.
        other = (time.process_time() - c0) - (time.thread_time() - t0)
        return {"plain_cpu": cpu["plain"], "hook_cpu": cpu["hook"], "other_cpu": other,
                "plain_wall": wall["plain"], "hook_wall": wall["hook"]}

    for row in rows:  # warm-up: xgboost's first run in a process pays its own set-up
        run(row, None)
        run(row, make(row, -1))
        side_by_side(row, make(row, -2))
    print(json.dumps({"ready": impl, "xgboost": xgb.__version__}), flush=True)
    for line in sys.stdin:
        cmd = line.split()
        if not cmd or cmd[0] == "quit":
            break
        i = int(cmd[1])
        result: dict[str, Any] = {}
        for row in rows:
            factory = make(row, i)
            if i % 2 == 0:
                plain, hooked = run(row, None), run(row, factory)
            else:
                hooked, plain = run(row, factory), run(row, None)
            result[row["key"]] = {"plain": plain, "hook": hooked, "sbs": side_by_side(row, make(row, i))}
            shutil.rmtree(out / f"{impl}-{row['key']}-{i}", ignore_errors=True)
        print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
