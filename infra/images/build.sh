#!/usr/bin/env bash
# Builds murphy's container images locally (no registry), in dependency order.
#
#   infra/images/build.sh [NAME...]     NAME: base python pytorch-cpu pytorch-gpu tensorflow-cpu
#                                       tensorflow-gpu demo rules xgboost, and
#                                       server seaweedfs postgres (`make up`'s deployment; also
#                                       python-deps); default: all of them
#
# Asking for an image builds the images it starts from too, so that a change to murphy's code
# reaches it; Docker's layer cache makes the unchanged ones take a second or two.
#
#   murphy/base:bookworm                  debootstrap rootfs + Python 3 (build-base.sh)
#   murphy/python-deps:latest             venv /opt/murphy with murphy's dependencies, user murphy
#   murphy/python:latest                  + murphy[s3]
#   murphy/pytorch-cpu:latest             python-deps + torch (CPU) + murphy[s3], toolkit entry point
#   murphy/pytorch-gpu:latest             python-deps + torch (CUDA, from PyPI) + murphy[s3]
#   murphy/tensorflow-cpu:latest          python-deps + tensorflow-cpu 2.21 (PyPI) + murphy[s3], toolkit entry point
#   murphy/tensorflow-gpu:latest          python-deps + tensorflow[and-cuda] 2.21 (PyPI) + murphy[s3]; not in CI
#   murphy/linear-regression-demo:latest  pytorch-cpu (the seed demo)
#   murphy/rule-evaluator:latest          python, `python -m murphy.rules` entry point
#   murphy/xgboost:latest                 python-deps + xgboost-cpu + murphy[s3]: SageMaker's XGBoost algorithm
#   murphy/server:latest                  python-deps + murphy[s3,service,postgres,docker,kubernetes] (`murphy server`)
#   murphy/seaweedfs:latest               base + SeaweedFS's `weed` (the S3 store of `make up`)
#   murphy/postgres:latest                base + Debian's PostgreSQL 15 (the job store of `make up`)
#
# Environment: PYTHON (builds the murphy wheel; default .venv/bin/python, else python3),
# TORCH_CPU_WHEEL (path of the torch CPU wheel; default: found in MURPHY_WHEEL_DIRS (/opt/wheels)
# or the cache, else `pip download`ed with the host's pip configuration), MURPHY_IMAGES_CACHE, VERBOSE=1 (show the
# docker build output; otherwise it goes to a log shown only on failure), FORCE=1 (base image).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
TORCH_VERSION=2.13.0
# The Python of murphy/base:bookworm (Debian bookworm's python3): the torch wheel must match it.
PY_TAG=cp311
CACHE=${MURPHY_IMAGES_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/murphy-images}
VERBOSE=${VERBOSE:-0}

ORDER=(base python-deps python pytorch-cpu pytorch-gpu tensorflow-cpu tensorflow-gpu demo rules xgboost server seaweedfs postgres)
declare -A TAG=(
    [base]=murphy/base:bookworm
    [python-deps]=murphy/python-deps:latest
    [python]=murphy/python:latest
    [pytorch-cpu]=murphy/pytorch-cpu:latest
    [pytorch-gpu]=murphy/pytorch-gpu:latest
    [tensorflow-cpu]=murphy/tensorflow-cpu:latest
    [tensorflow-gpu]=murphy/tensorflow-gpu:latest
    [demo]=murphy/linear-regression-demo:latest
    [rules]=murphy/rule-evaluator:latest
    [xgboost]=murphy/xgboost:latest
    [server]=murphy/server:latest
    [seaweedfs]=murphy/seaweedfs:latest
    [postgres]=murphy/postgres:latest
)
declare -A DIR=(
    [python-deps]=infra/images/python-deps
    [python]=infra/images/python
    [pytorch-cpu]=training_images/pytorch-cpu
    [pytorch-gpu]=training_images/pytorch-gpu
    [tensorflow-cpu]=training_images/tensorflow-cpu
    [tensorflow-gpu]=training_images/tensorflow-gpu
    [demo]=training_images/demo
    [rules]=rule_containers
    [xgboost]=training_images/xgboost
    [server]=infra/images/server
    [seaweedfs]=infra/images/seaweedfs
    [postgres]=infra/images/postgres
)
declare -A PARENT=(
    [python-deps]=base
    [python]=python-deps
    [pytorch-cpu]=python-deps
    [pytorch-gpu]=python-deps
    [tensorflow-cpu]=python-deps
    [tensorflow-gpu]=python-deps
    [demo]=pytorch-cpu
    [rules]=python
    [xgboost]=python-deps
    [server]=python-deps
    [seaweedfs]=base
    [postgres]=base
)

say() { printf 'build-images: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }
usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; }

# ---- what to build ----------------------------------------------------------------------------

declare -A WANTED=()
want() {
    local name=$1
    [[ -n ${TAG[$name]:-} ]] || die "unknown image '$name' (known: ${ORDER[*]})"
    WANTED[$name]=1
    if [[ -n ${PARENT[$name]:-} ]]; then want "${PARENT[$name]}"; fi
}
if [[ $# == 0 ]]; then set -- all; fi
for arg in "$@"; do
    case $arg in
        -h|--help) usage; exit 0 ;;
        all) for n in "${ORDER[@]}"; do want "$n"; done ;;
        *) want "$arg" ;;
    esac
done

command -v docker >/dev/null || die "docker is not installed"
docker info >/dev/null 2>&1 || die "cannot reach the Docker engine (is dockerd running? DOCKER_HOST=${DOCKER_HOST:-unset})"

if [[ -n ${PYTHON:-} ]]; then PY=$PYTHON
elif [[ -x $ROOT/.venv/bin/python ]]; then PY=$ROOT/.venv/bin/python
else PY=python3
fi

WORK=$(mktemp -d "${TMPDIR:-/tmp}/murphy-images.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

# ---- inputs -----------------------------------------------------------------------------------

# The murphy wheel, built from a copy of the sources so that nothing (build/, *.egg-info) is left
# in the work tree. Untracked files that git does not ignore are included: what you see is what
# you ship. A fixed SOURCE_DATE_EPOCH makes the wheel byte-identical for identical sources, so
# Docker's COPY cache holds when murphy did not change.
build_wheel() {
    local src=$WORK/src
    mkdir -p "$src" "$WORK/wheels"
    if git -C "$ROOT" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
        git -C "$ROOT" ls-files -z --cached --others --exclude-standard -- pyproject.toml README.md 'LICENSE*' service \
            | while IFS= read -r -d '' f; do [[ -f $ROOT/$f ]] && printf '%s\0' "$f"; done \
            | tar -C "$ROOT" --null -T - -cf - | tar -C "$src" -xf -
    else
        tar -C "$ROOT" --exclude=__pycache__ --exclude='*.egg-info' -cf - pyproject.toml README.md service | tar -C "$src" -xf -
    fi
    local isolation=()
    # The project venv has the build backend already: no download, no isolated env to set up.
    if "$PY" -c 'import setuptools, sys; sys.exit(int(setuptools.__version__.split(".")[0]) < 77)' 2>/dev/null; then
        isolation=(--no-build-isolation)
    fi
    say "building the murphy wheel with $PY"
    SOURCE_DATE_EPOCH=315532800 "$PY" -m pip wheel -q --no-deps "${isolation[@]}" -w "$WORK/wheels" "$src" >"$WORK/wheel.log" 2>&1 \
        || { cat "$WORK/wheel.log" >&2; die "cannot build the murphy wheel"; }
    WHEEL=$(ls "$WORK"/wheels/murphy-*.whl)
    # murphy's own requirements with the s3 extra, for murphy/python-deps.
    "$PY" - "$WHEEL" >"$WORK/requirements.txt" <<'PY'
import sys
import zipfile
from email.parser import Parser

try:
    from packaging.requirements import Requirement
except ImportError:  # pip always carries it
    from pip._vendor.packaging.requirements import Requirement

with zipfile.ZipFile(sys.argv[1]) as z:
    meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
    msg = Parser().parsestr(z.read(meta).decode())
for line in msg.get_all("Requires-Dist") or []:
    req = Requirement(line)
    if req.marker is None or req.marker.evaluate({"extra": "s3"}):
        extras = f"[{','.join(sorted(req.extras))}]" if req.extras else ""
        print(f"{req.name}{extras}{req.specifier}")
PY
    say "$(basename "$WHEEL"); dependencies: $(paste -sd' ' "$WORK/requirements.txt")"
}

# murphy's requirements with the extras `murphy server` needs in a deployment (murphy/server).
server_requirements() {
    "$PY" - "$WHEEL" <<'PY'
import sys
import zipfile
from email.parser import Parser

try:
    from packaging.requirements import Requirement
except ImportError:  # pip always carries it
    from pip._vendor.packaging.requirements import Requirement

with zipfile.ZipFile(sys.argv[1]) as z:
    meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
    msg = Parser().parsestr(z.read(meta).decode())
seen = set()
for line in msg.get_all("Requires-Dist") or []:
    req = Requirement(line)
    if req.marker is None or any(req.marker.evaluate({"extra": e}) for e in ("s3", "service", "postgres", "docker", "kubernetes")):
        extras = f"[{','.join(sorted(req.extras))}]" if req.extras else ""
        spec = f"{req.name}{extras}{req.specifier}"
        if spec not in seen:
            seen.add(spec)
            print(spec)
PY
}

# The torch CPU wheel (not on PyPI): $TORCH_CPU_WHEEL, else /opt/wheels or the cache, else
# `pip download` with the host's pip configuration (which knows where the CPU build lies).
torch_cpu_wheel() {
    if [[ -n ${TORCH_CPU_WHEEL:-} ]]; then
        [[ -f $TORCH_CPU_WHEEL ]] || die "TORCH_CPU_WHEEL=$TORCH_CPU_WHEEL does not exist"
        printf '%s\n' "$TORCH_CPU_WHEEL"; return
    fi
    local pattern="torch-$TORCH_VERSION+cpu-$PY_TAG-$PY_TAG-*linux*_x86_64.whl" d f
    for d in ${MURPHY_WHEEL_DIRS:-/opt/wheels} "$CACHE/wheels"; do
        for f in "$d"/$pattern; do
            if [[ -f $f ]]; then printf '%s\n' "$f"; return; fi
        done
    done
    say "torch $TORCH_VERSION CPU wheel not in ${MURPHY_WHEEL_DIRS:-/opt/wheels} or $CACHE/wheels: pip download"
    mkdir -p "$CACHE/wheels"
    "$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.11 \
        --platform manylinux_2_28_x86_64 -d "$WORK/download" "torch==$TORCH_VERSION" >&2 \
        || die "pip download torch==$TORCH_VERSION failed"
    for f in "$WORK"/download/$pattern; do
        if [[ -f $f ]]; then mv "$f" "$CACHE/wheels/"; printf '%s\n' "$CACHE/wheels/$(basename "$f")"; return; fi
    done
    die "pip found no CPU build of torch $TORCH_VERSION ($(ls "$WORK/download")); put $pattern in /opt/wheels or set TORCH_CPU_WHEEL"
}

# CA certificates the build host added to its trust store (Debian's place for them): an egress
# proxy that re-signs TLS makes PyPI unreachable from a build that does not trust them. The images
# trust them only while pip runs in the build; MURPHY_BUILD_CA names one more PEM file.
collect_build_ca() {
    mkdir -p "$WORK/build-ca"
    if [[ -d /usr/local/share/ca-certificates ]]; then
        find /usr/local/share/ca-certificates -name '*.crt' -type f -exec cp {} "$WORK/build-ca/" \;
    fi
    if [[ -n ${MURPHY_BUILD_CA:-} ]]; then cp "$MURPHY_BUILD_CA" "$WORK/build-ca/extra.crt"; fi
}

# ---- building ---------------------------------------------------------------------------------

declare -A SECS=()
build_image() {
    local name=$1 tag=${TAG[$1]} ctx=$WORK/ctx-$1 start=$SECONDS
    mkdir -p "$ctx"
    cp -a "$ROOT/${DIR[$name]}/." "$ctx/"
    cp -a "$WORK/build-ca" "$ctx/"
    case $name in
        python-deps) cp "$WORK/requirements.txt" "$ctx/" ;;
        python|pytorch-gpu|tensorflow-cpu|tensorflow-gpu|xgboost) cp -a "$WORK/wheels" "$ctx/" ;;
        server)
            cp -a "$WORK/wheels" "$ctx/"
            server_requirements >"$ctx/requirements.txt" ;;
        pytorch-cpu)
            cp -a "$WORK/wheels" "$ctx/"
            mkdir -p "$ctx/torch"
            ln "$TORCH_WHEEL" "$ctx/torch/" 2>/dev/null || cp "$TORCH_WHEEL" "$ctx/torch/" ;;
    esac
    say "building $tag from ${DIR[$name]}/Dockerfile"
    local cmd=(docker build --network host --force-rm --tag "$tag" "$ctx")
    if [[ $VERBOSE == 1 ]]; then
        DOCKER_BUILDKIT=0 "${cmd[@]}" || die "building $tag failed"
    else
        DOCKER_BUILDKIT=0 "${cmd[@]}" >"$WORK/$name.log" 2>&1 \
            || { tail -n 40 "$WORK/$name.log" >&2; die "building $tag failed (last lines above; VERBOSE=1 shows all)"; }
    fi
    rm -rf "$ctx"
    SECS[$name]=$((SECONDS - start))
    say "$tag built in ${SECS[$name]} s"
}

total_start=$SECONDS
if [[ -n ${WANTED[base]:-} ]]; then
    start=$SECONDS
    "$ROOT/infra/images/build-base.sh"
    SECS[base]=$((SECONDS - start))
fi
if (( ${#WANTED[@]} > 1 )) || [[ -z ${WANTED[base]:-} ]]; then
    build_wheel
fi
collect_build_ca
if [[ -n ${WANTED[pytorch-cpu]:-} ]]; then
    TORCH_WHEEL=$(torch_cpu_wheel)
    say "torch CPU wheel: $TORCH_WHEEL"
fi
for name in "${ORDER[@]}"; do
    if [[ -n ${WANTED[$name]:-} && $name != base ]]; then build_image "$name"; fi
done

# A dangling image is an old build of one of ours that a new build replaced under its tag.
docker image prune -f --filter label=murphy.image >/dev/null 2>&1 || true

say "done in $((SECONDS - total_start)) s"
printf '%-38s %9s %8s\n' IMAGE SIZE BUILD
for name in "${ORDER[@]}"; do
    [[ -n ${WANTED[$name]:-} ]] || continue
    size=$(docker image inspect -f '{{.Size}}' "${TAG[$name]}")
    printf '%-38s %6d MB %6d s\n' "${TAG[$name]}" $((size / 1000000)) "${SECS[$name]}"
done
