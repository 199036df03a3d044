#!/usr/bin/env bash
# Creates (idempotently) the isolated virtualenv that drives Debian's chromium for the dashboard's
# browser tests (tests/ui) and benchmarks/dashboard.py: Playwright (its Python package only; never
# `playwright install`, nothing is downloaded: the tests pass executable_path=/usr/bin/chromium)
# and TensorBoard (its own event reader checks murphy's TensorBoard files; its grpcio/protobuf stay
# out of murphy's venv).
#
# usage: infra/ci/browser_venv.sh [DIR]      (default: <repo>/.venv-browser)
# prints the venv's python path on its last stdout line.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
dir="${1:-${MURPHY_BROWSER_VENV:-$repo/.venv-browser}}"
python="${BROWSER_VENV_PYTHON:-python3}"

packages=(playwright==1.65.2 tensorboard==2.21.0 "numpy<2.3")
check='
import playwright.sync_api, tensorboard, numpy  # noqa: F401
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator  # noqa: F401
print("playwright ok; tensorboard", tensorboard.__version__, "numpy", numpy.__version__)
'
# shellcheck source=infra/ci/pinned_venv.sh
source "$here/pinned_venv.sh"
ensure_venv browser "$dir" "$python" "$check" "${packages[@]}"
