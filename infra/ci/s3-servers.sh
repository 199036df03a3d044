#!/usr/bin/env bash
# Start moto's server and SeaweedFS on free loopback ports for a test run.
# Usage: source infra/ci/s3-servers.sh start   -> exports MURPHY_TEST_{MOTO,SEAWEEDFS}_URL
#        source infra/ci/s3-servers.sh stop    -> stops them (by PID)
set -u
_murphy_py=${MURPHY_PY:-.venv/bin/python}
_murphy_dir=${MURPHY_SERVERS_DIR:-/tmp/murphy-ci-servers}

_murphy_start_one() {
  local name=$1 out="$_murphy_dir/$1.out"
  "$_murphy_py" tests/servers.py "$name" >"$out" 2>"$_murphy_dir/$name.err" &
  echo $! >"$_murphy_dir/$name.pid"
  for _ in $(seq 1 600); do
    if [ -s "$out" ]; then head -1 "$out"; return 0; fi
    if ! kill -0 "$(cat "$_murphy_dir/$name.pid")" 2>/dev/null; then
      echo "$name failed to start:" >&2; cat "$_murphy_dir/$name.err" >&2; return 1
    fi
    sleep 0.1
  done
  echo "$name did not start in 60 s" >&2; return 1
}

case "${1:-}" in
  start)
    mkdir -p "$_murphy_dir"
    MURPHY_TEST_MOTO_URL=$(_murphy_start_one moto) || return 1 2>/dev/null || exit 1
    MURPHY_TEST_SEAWEEDFS_URL=$(_murphy_start_one seaweedfs) || return 1 2>/dev/null || exit 1
    export MURPHY_TEST_MOTO_URL MURPHY_TEST_SEAWEEDFS_URL
    echo "moto: $MURPHY_TEST_MOTO_URL  seaweedfs: $MURPHY_TEST_SEAWEEDFS_URL"
    ;;
  stop)
    for name in moto seaweedfs; do
      if [ -f "$_murphy_dir/$name.pid" ]; then
        kill "$(cat "$_murphy_dir/$name.pid")" 2>/dev/null || true
        rm -f "$_murphy_dir/$name.pid"
      fi
    done
    ;;
  *) echo "usage: source $0 start|stop" >&2 ;;
esac
