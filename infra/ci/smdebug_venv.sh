#!/usr/bin/env bash
# Creates (idempotently) the isolated virtualenv that holds the REAL smdebug 1.0.34, used by the
# compatibility tests (tests/compat) and the benchmarks (benchmarks/) as a subprocess interpreter.
# murphy itself never imports smdebug.
#
# usage: infra/ci/smdebug_venv.sh [DIR]      (default: <repo>/.venv-smdebug)
# prints the venv's python path on its last stdout line.
#
# Why these pins (see shared reference/smdebug-format.md §k):
#  - requests, pandas, psutil: imported by smdebug but missing from the 1.0.34 wheel's metadata;
#  - numpy<2.3: smdebug calls ndarray.tostring(), removed in numpy 2.3;
#  - protobuf<=3.20.3: the wheel's generated *_pb2.py files fail on newer protobuf;
#  - torch pinned: an unpinned torch pulls a multi-GB CUDA build; 2.13.0 has a local CPU wheel.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
dir="${1:-${MURPHY_SMDEBUG_VENV:-$repo/.venv-smdebug}}"
python="${SMDEBUG_VENV_PYTHON:-python3.11}"
command -v "$python" >/dev/null 2>&1 || python=python3

packages=(smdebug==1.0.34 "numpy<2.3" "protobuf<=3.20.3" requests pandas psutil torch==2.13.0)
check='
import smdebug, smdebug.pytorch, smdebug.trials  # noqa: F401
import numpy, torch
from smdebug._version import __version__
assert __version__ == "1.0.34", __version__
print("smdebug", __version__, "numpy", numpy.__version__, "torch", torch.__version__)
'
# shellcheck source=infra/ci/pinned_venv.sh
source "$here/pinned_venv.sh"
ensure_venv smdebug "$dir" "$python" "$check" "${packages[@]}"
