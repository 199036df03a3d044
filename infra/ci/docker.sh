#!/usr/bin/env bash
# Start a Docker engine for a test run (the Docker runtime's tests, murphy's images).
# Usage: source infra/ci/docker.sh start   -> dockerd running (or the one already running used)
#        source infra/ci/docker.sh stop    -> stops dockerd, only if `start` started it
# Needs the `docker.io` package and root. This machine has no iptables and no bridge for the
# engine to manage, so dockerd runs without them; containers use network "none" or "host",
# which is all murphy asks for.
set -u
_murphy_docker_dir=${MURPHY_SERVERS_DIR:-/tmp/murphy-ci-servers}

_murphy_docker_ready() {
  docker info >/dev/null 2>&1
}

_murphy_docker_start() {
  if _murphy_docker_ready; then
    echo "docker: using the engine already running"
    return 0
  fi
  command -v dockerd >/dev/null || { echo "dockerd not found (apt-get install docker.io)" >&2; return 1; }
  mkdir -p "$_murphy_docker_dir"
  nohup dockerd --iptables=false --ip6tables=false --bridge=none \
    >"$_murphy_docker_dir/dockerd.log" 2>&1 &
  echo $! >"$_murphy_docker_dir/dockerd.pid"
  local i
  for i in $(seq 1 120); do
    if _murphy_docker_ready; then
      echo "docker: dockerd started (pid $(cat "$_murphy_docker_dir/dockerd.pid"))"
      return 0
    fi
    sleep 0.5
  done
  echo "dockerd did not become ready in 60 s; its log:" >&2
  tail -20 "$_murphy_docker_dir/dockerd.log" >&2
  return 1
}

_murphy_docker_stop() {
  local pidfile="$_murphy_docker_dir/dockerd.pid"
  [ -f "$pidfile" ] || return 0
  local pid
  pid=$(cat "$pidfile")
  kill "$pid" 2>/dev/null || true
  local i
  for i in $(seq 1 60); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.5
  done
  rm -f "$pidfile"
}

case "${1:-}" in
  start) _murphy_docker_start ;;
  stop) _murphy_docker_stop ;;
  *) echo "usage: source infra/ci/docker.sh start|stop" >&2; false ;;
esac
