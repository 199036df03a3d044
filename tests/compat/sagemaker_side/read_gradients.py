"""Runs inside .venv-smdebug (the REAL smdebug 1.0.34): open a job's Debugger artifacts the way the
seed article does and print every gradient's value per step as JSON (non-finite values as strings).

usage: read_gradients.py S3_PATH      (endpoint and credentials from the environment)
"""

import json
import sys

from smdebug.trials import create_trial


def number(x: float) -> object:
    return x if x == x and abs(x) != float("inf") else str(x)


if __name__ == "__main__":
    trial = create_trial(sys.argv[1])
    out = {"steps": [int(s) for s in trial.steps()], "gradients": {}}
    for name in trial.tensor_names(collection="gradients"):
        tensor = trial.tensor(name)
        out["gradients"][name] = {str(s): [number(float(v)) for v in tensor.value(s).ravel()] for s in tensor.steps()}
    print(json.dumps(out))
