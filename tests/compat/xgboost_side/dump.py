"""usage: python dump.py smdebug|murphy TRIAL_PATH OUT_PREFIX: read an XGBoost trial with that
side's create_trial and save what it reads (trial_dump.save format)."""

import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import trial_dump


def dump(trial: Any) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    names = sorted(trial.tensor_names())
    meta: dict[str, Any] = {
        "steps": [int(s) for s in trial.steps()],
        "modes": {str(s): [trial.mode(s).name, int(trial.mode_step(s))] for s in trial.steps()},
        "tensor_names": names,
        "workers": sorted(trial.workers()),
        "collections": {c: sorted(trial.tensor_names(collection=c)) for c in sorted(trial.collections())},
        "tensor_steps": {n: [int(s) for s in trial.tensor(n).steps()] for n in names},
    }
    arrays = {f"{n}|{s}": np.asarray(trial.tensor(n).value(s)) for n in names for s in trial.tensor(n).steps()}
    return meta, arrays


if __name__ == "__main__":
    side, path, prefix = sys.argv[1:4]
    if side == "smdebug":
        from smdebug.trials import create_trial
    else:
        from murphy.trial import create_trial
    meta, arrays = dump(create_trial(path))
    trial_dump.save(prefix, meta, arrays)
    print(f"dumped {len(arrays)} arrays", flush=True)
