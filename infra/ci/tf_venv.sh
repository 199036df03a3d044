#!/usr/bin/env bash
# Creates (idempotently) the isolated virtualenv that holds TensorFlow 2.21 (CPU) and murphy, used
# by the TensorFlow tests (tests/tf) and benchmarks/hook_overhead_tf.py as a subprocess interpreter.
# TensorFlow never enters murphy's core venv: it pins numpy/protobuf and weighs ~1.6 GB installed.
#
# usage: infra/ci/tf_venv.sh [DIR]      (default: <repo>/.venv-tf)
# prints the venv's python path on its last stdout line.
#
# Why these pins (see shared reference/frameworks.md §2, §3.1):
#  - tensorflow-cpu==2.21.0: the CPU-only wheel (~260 MB), not `tensorflow` (which pulls CUDA);
#    it brings keras 3, numpy >= 1.26 and protobuf >= 6.31 itself;
#  - boto3: murphy's hook writes straight to s3:// out_dirs;
#  - murphy from this repo, editable: the hook the tests exercise is the checkout's (the tests also
#    put <repo>/service first on PYTHONPATH, so a venv built from another checkout still runs this one).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
dir="${1:-${MURPHY_TF_VENV:-$repo/.venv-tf}}"
python="${TF_VENV_PYTHON:-python3.11}"
command -v "$python" >/dev/null 2>&1 || python=python3

packages=(tensorflow-cpu==2.21.0 boto3 -e "$repo")
check='
import tensorflow as tf, keras, numpy
import murphy.hook
assert tf.__version__ == "2.21.0", tf.__version__
print("tensorflow", tf.__version__, "keras", keras.__version__, "numpy", numpy.__version__)
'
# shellcheck source=infra/ci/pinned_venv.sh
source "$here/pinned_venv.sh"
ensure_venv tf "$dir" "$python" "$check" "${packages[@]}"
