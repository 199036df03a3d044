"""A script-mode entry point as a user writes it for ``sagemaker.xgboost.XGBoost``: CSV channels
(label first), smdebug's XGBoost hook from the job's debughookconfig.json, xgboost.train."""

import argparse
import os

import numpy as np

# What a SageMaker Debugger script imports, unchanged: murphy's toolkit puts its smdebug alias
# (backed by murphy.hook.xgboost) on the script's path; no fallback, so the test proves it.
import smdebug
import xgboost as xgb
from smdebug.xgboost import Hook

HOOK_MODULE = "smdebug.xgboost" + (" (murphy's alias)" if getattr(smdebug, "__murphy_alias__", False) else "")

parser = argparse.ArgumentParser()
parser.add_argument("--num_round", type=int, default=20)
parser.add_argument("--max_depth", type=int, default=4)
args = parser.parse_args()


def load(channel: str) -> xgb.DMatrix:
    d = os.environ[f"SM_CHANNEL_{channel.upper()}"]
    data = np.vstack([np.loadtxt(os.path.join(d, f), delimiter=",", ndmin=2) for f in sorted(os.listdir(d))])
    return xgb.DMatrix(data[:, 1:], label=data[:, 0])


dtrain, dval = load("train"), load("validation")
hook = Hook.create_from_json_file(train_data=dtrain, validation_data=dval)
print(f"hook from {HOOK_MODULE}", flush=True)
params = {"objective": "binary:logistic", "max_depth": args.max_depth, "eta": 0.1, "nthread": 1, "eval_metric": "logloss"}
bst = xgb.train(params, dtrain, args.num_round, evals=[(dtrain, "train"), (dval, "validation")], callbacks=[hook])
bst.save_model(os.path.join(os.environ["SM_MODEL_DIR"], "xgboost-model.json"))
