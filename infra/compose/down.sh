#!/usr/bin/env bash
# `make down`: stops what `make up` started (docs/deployment.md), and only that: the compose
# project's containers, or the processes whose PIDs up.sh recorded, and the job containers
# murphy's Docker runtime started for this deployment. Data stays, so the next `make up` finds
# its jobs and objects again (jobs that were still running end Failed: their containers are gone).
#
#   infra/compose/down.sh            PURGE=1 also removes the state directory (and, in compose
#                                    mode, the data volumes): credentials, jobs, objects
# Environment: MURPHY_UP_DIR (the state directory, default <repo>/.murphy-up), MURPHY_UP_COMPOSE.
set -euo pipefail
# shellcheck source=infra/compose/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

PURGE=${PURGE:-0}

stop_processes() {
    local pid
    if pid=$(live_pid "$STATE/murphy.pid" "murphy server"); then
        say "stopping murphy (pid $pid)"
        stop_pid "$pid" murphy
    fi
    if pid=$(live_pid "$STATE/postgres/postmaster.pid" "postgres"); then
        say "stopping PostgreSQL (pid $pid)"
        pg_as env PGDATA="$STATE/postgres" "$ROOT/infra/images/postgres/murphy-postgres" stop \
            || stop_pid "$pid" PostgreSQL INT
    fi
    if pid=$(live_pid "$STATE/s3.pid" "weed mini"); then
        say "stopping SeaweedFS (pid $pid)"
        stop_pid "$pid" SeaweedFS
    fi
    rm -f "$STATE/murphy.pid" "$STATE/s3.pid"
}

remove_job_containers() {
    command -v docker >/dev/null && docker info >/dev/null 2>&1 || return 0
    local ids
    ids=$(job_containers) || return 0
    [[ -n $ids ]] || return 0
    # shellcheck disable=SC2086
    say "removing $(echo $ids | wc -w) job container(s) of this deployment"
    # shellcheck disable=SC2086
    docker rm -f $ids >/dev/null
}

purge() {
    say "removing $STATE"
    if ! rm -rf "$STATE" 2>/dev/null; then
        # Files a root process wrote (the server's container runs as root) that this user may not
        # remove: remove them from a container, as root there.
        command -v docker >/dev/null || die "cannot remove $STATE (files of another user)"
        say "some files belong to root: removing them from a container"
        docker run --rm --network none -v "$STATE:/purge" murphy/base:bookworm \
            find /purge -mindepth 1 -delete
        rm -rf "$STATE"
    fi
}

if [[ ! -f $STATE/up.env ]]; then
    say "nothing was started from $STATE"
    if [[ $PURGE == 1 && -d $STATE ]]; then purge; fi
    exit 0
fi
load_env "$STATE/up.env"
mode=$(cat "$STATE/mode" 2>/dev/null || echo "$MURPHY_UP_MODE")

if [[ $mode == compose ]]; then
    say "stopping the compose project $MURPHY_UP_PROJECT"
    if [[ $PURGE == 1 ]]; then compose down -v >&2; else compose down >&2; fi
else
    stop_processes
fi
remove_job_containers
rm -f "$STATE/mode"

if [[ $PURGE == 1 ]]; then
    purge
    say "down; everything removed"
else
    say "down; data kept in $STATE (\`make down PURGE=1\` removes it)"
fi
