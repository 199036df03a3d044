"""One side of benchmarks/hook_overhead_xgb.py, run in murphy's venv or the smdebug+xgboost venv.

usage: _xgb_bench_worker.py murphy|smdebug CONFIG ROUNDS REPEATS OUT_DIR [ROWS]
CONFIG: ``defaults`` (Hook(out_dir): metrics every 10 rounds) or ``all10`` (every collection,
every 10 rounds, with train and validation data). Alternates plain and hooked xgboost.train runs
(same data, one thread); prints {"plain_s": [...], "hook_s": [...], "in_hook_s": [...]} (time
inside the hook's callbacks and close()) as its last line.
"""

from __future__ import annotations

import json
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ALL = ["hyperparameters", "metrics", "losses", "predictions", "labels", "feature_importance",
       "average_shap", "full_shap", "trees"]


def main() -> None:
    impl, config, rounds, repeats, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), Path(sys.argv[5])
    rows = int(sys.argv[6]) if len(sys.argv) > 6 else 5000
    if impl == "smdebug":
        import pkg_resources

        real = pkg_resources.get_distribution
        pkg_resources.get_distribution = lambda n: real("xgboost-cpu") if n == "xgboost" else real(n)
        from smdebug import SaveConfig
        from smdebug.xgboost import Hook
    else:
        from murphy.hook import SaveConfig
        from murphy.hook.xgboost import Hook
    import xgboost as xgb

    rng = np.random.default_rng(0)
    z = rng.normal(size=rows + 1000)
    x = (z[:, None] + 0.5 * rng.normal(size=(rows + 1000, 20))).astype(np.float32)
    y = (z > 0).astype(np.float32)
    dtrain, dval = xgb.DMatrix(x[:rows], label=y[:rows]), xgb.DMatrix(x[rows:], label=y[rows:])
    # SHAP (pred_contribs) costs O(rows x trees x leaves x depth^2) in xgboost itself, the same for
    # both hooks: computed on 500 rows, as a user passes a sample as train_data.
    dshap = xgb.DMatrix(x[:500], label=y[:500])
    params = {"objective": "binary:logistic", "max_depth": 6, "eta": 0.1, "nthread": 1, "eval_metric": "logloss"}

    class Timed(xgb.callback.TrainingCallback):
        """The hook, with the time spent inside its callbacks (and close()) counted."""

        def __init__(self, inner: Any) -> None:
            super().__init__()
            self.inner, self.spent = inner, 0.0

        def after_iteration(self, model: Any, epoch: int, evals_log: Any) -> bool:
            t = time.perf_counter()
            stop = self.inner.after_iteration(model, epoch, evals_log)
            self.spent += time.perf_counter() - t
            return bool(stop)

        def after_training(self, model: Any) -> Any:
            t = time.perf_counter()
            model = self.inner.after_training(model)
            if hasattr(self.inner, "close"):
                self.inner.close()
            self.spent += time.perf_counter() - t
            return model

    in_hook: list[float] = []

    def run(hook: Any) -> float:
        timed = Timed(hook) if hook is not None else None
        t0 = time.perf_counter()
        xgb.train(params, dtrain, rounds, evals=[(dtrain, "train"), (dval, "validation")],
                  callbacks=[timed] if timed is not None else None, verbose_eval=False)
        elapsed = time.perf_counter() - t0
        if timed is not None:
            in_hook.append(timed.spent)
        return elapsed

    def make(i: int) -> Any:
        d = out / f"{impl}-{config}-{i}"
        shutil.rmtree(d, ignore_errors=True)
        if config == "defaults":
            return Hook(out_dir=str(d))
        return Hook(out_dir=str(d), include_collections=ALL, save_config=SaveConfig(save_interval=10),
                    hyperparameters=params, train_data=dshap, validation_data=dval)

    run(None)  # warm-up
    plain, hooked = [], []
    for i in range(repeats):
        plain.append(run(None))
        hooked.append(run(make(i)))
    print(json.dumps({"plain_s": plain, "hook_s": hooked, "in_hook_s": in_hook}))


if __name__ == "__main__":
    main()
