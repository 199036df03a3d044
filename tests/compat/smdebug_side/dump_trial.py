"""Read a trial with the REAL smdebug ``create_trial`` and dump what it reads (smdebug venv only).

usage: python dump_trial.py TRIAL_PATH OUT_PREFIX   → OUT_PREFIX.json + OUT_PREFIX.npz
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import trial_dump
from smdebug.core.modes import ModeKeys
from smdebug.trials import create_trial

if __name__ == "__main__":
    trial = create_trial(sys.argv[1])
    meta, arrays = trial_dump.dump(trial, ModeKeys)
    trial_dump.save(sys.argv[2], meta, arrays)
    print(f"dumped {len(arrays)} arrays, {len(meta['tensor_names'])} tensors", flush=True)
