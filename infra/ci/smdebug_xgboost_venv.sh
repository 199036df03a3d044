#!/usr/bin/env bash
# Creates (idempotently) the isolated virtualenv with the REAL smdebug 1.0.34 and xgboost, used by
# the XGBoost compatibility tests (tests/compat/xgboost) and benchmarks/hook_overhead_xgb.py as a
# subprocess interpreter. murphy itself never imports smdebug.
#
# usage: infra/ci/smdebug_xgboost_venv.sh [DIR]   (default: <repo>/.venv-smdebug-xgboost)
# prints the venv's python path on its last stdout line.
#
# Why these pins (docs/xgboost.md, "smdebug's side"):
#  - xgboost-cpu 3.2.0: the newest xgboost that smdebug 1.0.34's XGBoost hook drives (checked:
#    3.2.0 runs every collection; smdebug's code needs xgboost >= 1.7 for xgb.collective). The
#    CPU-only wheel (5.6 MB) instead of `xgboost` (131.7 MB + 351.5 MB of NCCL). Its distribution
#    is named `xgboost-cpu`, and smdebug asks pkg_resources for `xgboost` at import: the drivers
#    (tests/compat/xgboost/smdebug_side) answer that lookup with xgboost.__version__ first;
#  - requests, pandas, psutil, setuptools<81 (pkg_resources): imported by smdebug, missing from
#    the 1.0.34 wheel's metadata;
#  - numpy<2.3: smdebug calls ndarray.tostring(), removed in numpy 2.3;
#  - protobuf<=3.20.3: the wheel's generated *_pb2.py files fail on newer protobuf.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
dir="${1:-${MURPHY_SMDEBUG_XGBOOST_VENV:-$repo/.venv-smdebug-xgboost}}"
python="${SMDEBUG_VENV_PYTHON:-python3.11}"
command -v "$python" >/dev/null 2>&1 || python=python3

packages=(smdebug==1.0.34 "numpy<2.3" "protobuf<=3.20.3" requests pandas psutil "setuptools<81" xgboost-cpu==3.2.0)
check='
import pkg_resources, xgboost
_real = pkg_resources.get_distribution
pkg_resources.get_distribution = lambda n: _real("xgboost-cpu") if n == "xgboost" else _real(n)
import smdebug.xgboost, smdebug.trials  # noqa: F401
from smdebug._version import __version__
assert __version__ == "1.0.34", __version__
print("smdebug", __version__, "xgboost", xgboost.__version__)
'
# shellcheck source=infra/ci/pinned_venv.sh
source "$here/pinned_venv.sh"
ensure_venv smdebug-xgboost "$dir" "$python" "$check" "${packages[@]}"
