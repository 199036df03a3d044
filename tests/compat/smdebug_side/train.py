"""Record tests/compat/workload.py with the REAL smdebug PyTorch hook (smdebug venv only).

usage: python train.py OUT_DIR [TRUTH_DIR]   (RANK/WORLD_SIZE/MASTER_* env for several workers)
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import smdebug.pytorch as smd
import workload

if __name__ == "__main__":
    api = workload.HookApi(smd.Hook, smd.SaveConfig, smd.ReductionConfig, smd.modes)
    workload.run(api, sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else None)
