"""usage: python train.py smdebug|murphy OUT_DIR binary|multiclass  (the smdebug side runs in the
smdebug+xgboost venv, see infra/ci/smdebug_xgboost_venv.sh)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import workload

if __name__ == "__main__":
    side, out_dir, kind = sys.argv[1:4]
    if side == "smdebug":
        import pkg_resources

        # smdebug asks for the distribution "xgboost"; the CPU wheel is "xgboost-cpu".
        _real = pkg_resources.get_distribution
        pkg_resources.get_distribution = lambda n: _real("xgboost-cpu") if n == "xgboost" else _real(n)
        from smdebug import SaveConfig
        from smdebug.xgboost import Hook
    else:
        from murphy.hook import SaveConfig
        from murphy.hook.xgboost import Hook
    workload.train(Hook, SaveConfig(save_interval=5), out_dir, kind)
    print("trained", side, kind, flush=True)
