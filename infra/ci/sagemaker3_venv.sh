#!/usr/bin/env bash
# Creates (idempotently) the isolated virtualenv that holds the STOCK sagemaker Python SDK 3.x
# (what `pip install sagemaker` gives today), used by tests/compat/test_sagemaker3_sdk.py as a
# subprocess interpreter to drive `murphy server` exactly as a v3 notebook would. murphy itself
# never imports sagemaker.
#
# usage: infra/ci/sagemaker3_venv.sh [DIR]      (default: <repo>/.venv-sagemaker3)
# prints the venv's python path on its last stdout line.
#
# Why these pins: 3.x is a meta-package whose pieces (core, train, serve, mlops) move together;
# pinning every one of them keeps the request bodies the test asserts on (ModelTrainer's
# ContainerEntrypoint, the sm_drivers channel, Rule.sagemaker()'s placeholder image) from
# changing under CI. numpy/pandas are whatever these resolve to (no smdebug here).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
dir="${1:-${MURPHY_SAGEMAKER3_VENV:-$repo/.venv-sagemaker3}}"
python="${SAGEMAKER_VENV_PYTHON:-python3.11}"
command -v "$python" >/dev/null 2>&1 || python=python3

packages=("sagemaker==3.27.0" "sagemaker-core==2.27.0" "sagemaker-train==1.27.0" "sagemaker-serve==1.27.0"
          "sagemaker-mlops==1.27.0" "boto3==1.44.8" "botocore==1.44.8")
check='
import sagemaker.core.resources, sagemaker.core.debugger, sagemaker.train  # noqa: F401
from sagemaker.train import ModelTrainer  # noqa: F401
from sagemaker.train.configs import SourceCode  # noqa: F401
import importlib.metadata as md
versions = {p: md.version(p) for p in ("sagemaker", "sagemaker-core", "sagemaker-train", "boto3")}
assert versions["sagemaker"].startswith("3."), versions
print(versions)
'
# shellcheck source=infra/ci/pinned_venv.sh
source "$here/pinned_venv.sh"
ensure_venv sagemaker3 "$dir" "$python" "$check" "${packages[@]}"
