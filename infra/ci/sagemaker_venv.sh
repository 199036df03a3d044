#!/usr/bin/env bash
# Creates (idempotently) the isolated virtualenv that holds the STOCK sagemaker Python SDK 2.x,
# used by tests/compat/test_sagemaker_sdk.py as a subprocess interpreter to drive `murphy server`
# exactly as a SageMaker notebook would. murphy itself never imports sagemaker.
#
# usage: infra/ci/sagemaker_venv.sh [DIR]      (default: <repo>/.venv-sagemaker)
# prints the venv's python path on its last stdout line.
#
# Why these pins (see shared reference/sagemaker-api.md §d.1):
#  - sagemaker<3: 3.x has no sagemaker.estimator / rules= (Debugger is a v2-only SDK story);
#  - numpy<2, pandas<3: what the 2.x line was built and tested against; smdebug is NOT installed here
#    (the tests read tensors with the separate smdebug venv, infra/ci/smdebug_venv.sh).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
dir="${1:-${MURPHY_SAGEMAKER_VENV:-$repo/.venv-sagemaker}}"
python="${SAGEMAKER_VENV_PYTHON:-python3.11}"
command -v "$python" >/dev/null 2>&1 || python=python3

packages=("sagemaker>=2.257,<3" "numpy<2" "pandas<3" boto3)
export SAGEMAKER_SUPPRESS_V2_WARNING=1
check='
import sagemaker, sagemaker.estimator, sagemaker.pytorch, sagemaker.debugger  # noqa: F401
import boto3, numpy
major = int(sagemaker.__version__.split(".")[0])
assert major == 2, sagemaker.__version__
print("sagemaker", sagemaker.__version__, "boto3", boto3.__version__, "numpy", numpy.__version__)
'
# shellcheck source=infra/ci/pinned_venv.sh
source "$here/pinned_venv.sh"
ensure_venv sagemaker "$dir" "$python" "$check" "${packages[@]}"
