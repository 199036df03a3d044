#!/usr/bin/env bash
# Builds murphy/base:bookworm without a registry: a Debian bookworm rootfs made by debootstrap,
# imported with `docker import`. Every other murphy image starts FROM it.
#
#   infra/images/build-base.sh          skip when the tag exists
#   FORCE=1 infra/images/build-base.sh  re-import (from the cached rootfs tarball if present)
#   FORCE=2 infra/images/build-base.sh  also rerun debootstrap
#
# The rootfs tarball is kept in $MURPHY_IMAGES_CACHE (default ${XDG_CACHE_HOME:-~/.cache}/murphy-images)
# so that `docker rmi` followed by a rebuild does not download Debian again. Its name carries a
# hash of the recipe, so changing the suite, mirror or package list makes a new one.
set -euo pipefail

TAG=${MURPHY_BASE_TAG:-murphy/base:bookworm}
SUITE=bookworm
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
PACKAGES=python3,python3-venv,python3-pip,ca-certificates
CACHE=${MURPHY_IMAGES_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/murphy-images}
FORCE=${FORCE:-0}
# Bump when the rootfs clean-up below changes, so an old tarball is not reused.
RECIPE_VERSION=1

say() { printf 'build-base: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }

command -v docker >/dev/null || die "docker is not installed"
docker info >/dev/null 2>&1 || die "cannot reach the Docker engine (is dockerd running? DOCKER_HOST=${DOCKER_HOST:-unset})"

if [[ $FORCE == 0 ]] && docker image inspect "$TAG" >/dev/null 2>&1; then
    say "$TAG exists, skipping (FORCE=1 re-imports it)"
    exit 0
fi

key=$(printf '%s\n' "$SUITE" "$MIRROR" "$PACKAGES" "$RECIPE_VERSION" | sha256sum | cut -c1-12)
tarball=$CACHE/rootfs-$SUITE-$key.tar

if [[ $FORCE == 2 || ! -s $tarball ]]; then
    [[ $(id -u) == 0 ]] || die "debootstrap needs root (the rootfs tarball $tarball is not cached yet)"
    command -v debootstrap >/dev/null || die "debootstrap is not installed (apt-get install debootstrap)"
    mkdir -p "$CACHE"
    rootfs=$(mktemp -d "${TMPDIR:-/tmp}/murphy-rootfs.XXXXXX")
    # debootstrap leaves files owned by root that a non-root `rm` cannot remove; we are root here.
    trap 'rm -rf "$rootfs" "$rootfs.log" "$tarball.part"' EXIT
    say "debootstrap --variant=minbase $SUITE ($PACKAGES) from $MIRROR: a few minutes"
    start=$SECONDS
    debootstrap --variant=minbase --include="$PACKAGES" "$SUITE" "$rootfs" "$MIRROR" >"$rootfs.log" 2>&1 \
        || { tail -n 30 "$rootfs.log" >&2; die "debootstrap failed (log above)"; }
    rm -f "$rootfs.log"
    say "debootstrap done in $((SECONDS - start)) s; cleaning the rootfs"
    # Downloaded packages, package lists and logs are not needed at run time; documentation is
    # dropped as slim Debian images do (copyright files stay), and the dpkg rule keeps it that way
    # for packages installed later in derived images.
    rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/cache/apt/*.bin \
        "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/log/* "$rootfs"/var/cache/debconf/*-old \
        "$rootfs"/usr/share/man/* "$rootfs"/usr/share/info/* "$rootfs"/usr/share/locale/*
    find "$rootfs"/usr/share/doc -mindepth 1 -not -name copyright -not -type d -delete
    find "$rootfs"/usr/share/doc -mindepth 1 -type d -empty -delete
    cat >"$rootfs"/etc/dpkg/dpkg.cfg.d/murphy-nodoc <<'CFG'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
CFG
    # Nothing in the images needs the host's resolver or hostname baked in; Docker provides them.
    : >"$rootfs"/etc/resolv.conf
    : >"$rootfs"/etc/hostname
    tar --numeric-owner -C "$rootfs" -cf "$tarball.part" .
    mv "$tarball.part" "$tarball"
    rm -rf "$rootfs"
    trap - EXIT
    say "rootfs cached at $tarball ($(du -h "$tarball" | cut -f1))"
else
    say "using the cached rootfs $tarball"
fi

say "docker import -> $TAG"
docker import \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV LANG=C.UTF-8' \
    --change 'LABEL org.opencontainers.image.title=murphy-base murphy.image=base' \
    --change 'CMD ["/bin/bash"]' \
    --message "debootstrap --variant=minbase --include=$PACKAGES $SUITE" \
    "$tarball" "$TAG" >/dev/null
say "$TAG: $(docker image inspect -f '{{.Size}}' "$TAG" | awk '{printf "%.0f MB", $1/1e6}')"
