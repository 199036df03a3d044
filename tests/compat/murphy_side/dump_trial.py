"""Read a trial with murphy's ``create_trial`` and dump what it reads (murphy's venv).

usage: python dump_trial.py TRIAL_PATH OUT_PREFIX   → OUT_PREFIX.json + OUT_PREFIX.npz
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import trial_dump

from murphy.core.modes import ModeKeys
from murphy.trial import create_trial

if __name__ == "__main__":
    trial = create_trial(sys.argv[1])
    meta, arrays = trial_dump.dump(trial, ModeKeys)
    trial_dump.save(sys.argv[2], meta, arrays)
    print(f"dumped {len(arrays)} arrays, {len(meta['tensor_names'])} tensors", flush=True)
