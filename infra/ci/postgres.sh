#!/usr/bin/env bash
# Start Debian's PostgreSQL cluster for a test run (the job store's contract tests).
# Usage: source infra/ci/postgres.sh start   -> exports MURPHY_TEST_POSTGRES_URL
#        source infra/ci/postgres.sh stop    -> stops the cluster, only if `start` started it
# Needs the `postgresql` package (pg_ctlcluster) and root (or the postgres user). Idempotent:
# an already running cluster is used as it is; the role is created or its password reset.
# The tests create (and drop) their own database, so the role only needs CREATEDB.
set -u
_murphy_pg_dir=${MURPHY_SERVERS_DIR:-/tmp/murphy-ci-servers}
_murphy_pg_role=${MURPHY_PG_ROLE:-murphy}
_murphy_pg_password=${MURPHY_PG_PASSWORD:-murphy}

# "<version> <cluster> <port> <status>" of the first cluster, creating one if there is none.
_murphy_pg_cluster() {
  local line
  line=$(pg_lsclusters -h 2>/dev/null | head -1)
  if [ -z "$line" ]; then
    local version
    version=$(ls /usr/lib/postgresql 2>/dev/null | sort -n | tail -1)
    [ -n "$version" ] || { echo "no PostgreSQL server installed (apt-get install postgresql)" >&2; return 1; }
    pg_createcluster "$version" main >/dev/null || return 1
    line=$(pg_lsclusters -h | head -1)
  fi
  echo "$line" | awk '{print $1, $2, $3, $4}'
}

_murphy_pg_psql() {
  if [ "$(id -un)" = postgres ]; then
    psql -X -q -v ON_ERROR_STOP=1 -p "$1" -d postgres -c "$2"
  elif [ "$(id -u)" = 0 ]; then
    runuser -u postgres -- psql -X -q -v ON_ERROR_STOP=1 -p "$1" -d postgres -c "$2"
  else
    sudo -n -u postgres psql -X -q -v ON_ERROR_STOP=1 -p "$1" -d postgres -c "$2"
  fi
}

_murphy_pg_start() {
  command -v pg_ctlcluster >/dev/null || { echo "pg_ctlcluster not found (apt-get install postgresql)" >&2; return 1; }
  mkdir -p "$_murphy_pg_dir"
  local info version cluster port status
  info=$(_murphy_pg_cluster) || return 1
  read -r version cluster port status <<<"$info"
  if [ "$status" != online ]; then
    pg_ctlcluster "$version" "$cluster" start || return 1
    echo "$version $cluster" >"$_murphy_pg_dir/postgres.started"
  fi
  local ready=
  for _ in $(seq 1 300); do
    if pg_isready -q -h 127.0.0.1 -p "$port"; then ready=1; break; fi
    sleep 0.1
  done
  [ -n "$ready" ] || { echo "PostgreSQL $version/$cluster is not ready on 127.0.0.1:$port after 30 s" >&2; return 1; }
  # Debian's pg_hba.conf already allows password (scram-sha-256) logins over 127.0.0.1.
  _murphy_pg_psql "$port" "DO \$\$ BEGIN
      IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '$_murphy_pg_role') THEN
        CREATE ROLE $_murphy_pg_role LOGIN CREATEDB PASSWORD '$_murphy_pg_password';
      ELSE
        ALTER ROLE $_murphy_pg_role LOGIN CREATEDB PASSWORD '$_murphy_pg_password';
      END IF;
    END \$\$;" || return 1
  MURPHY_TEST_POSTGRES_URL="postgresql+psycopg://$_murphy_pg_role:$_murphy_pg_password@127.0.0.1:$port/postgres"
  export MURPHY_TEST_POSTGRES_URL
  echo "postgres: $MURPHY_TEST_POSTGRES_URL"
}

_murphy_pg_stop() {
  if [ -f "$_murphy_pg_dir/postgres.started" ]; then
    local version cluster
    read -r version cluster <"$_murphy_pg_dir/postgres.started"
    pg_ctlcluster "$version" "$cluster" stop || true
    rm -f "$_murphy_pg_dir/postgres.started"
  fi
}

case "${1:-}" in
  start) _murphy_pg_start || return 1 2>/dev/null || exit 1 ;;
  stop) _murphy_pg_stop ;;
  *) echo "usage: source infra/ci/postgres.sh start|stop" >&2 ;;
esac
