"""Record tests/compat/workload.py with murphy's PyTorch hook (murphy's venv).

usage: python train.py OUT_DIR [TRUTH_DIR]   (RANK/WORLD_SIZE/MASTER_* env for several workers)
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import workload

from murphy.core import modes
from murphy.core.reduction_config import ReductionConfig
from murphy.core.save_config import SaveConfig
from murphy.hook.torch import Hook

if __name__ == "__main__":
    api = workload.HookApi(Hook, SaveConfig, ReductionConfig, modes.ModeKeys)
    workload.run(api, sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else None)
