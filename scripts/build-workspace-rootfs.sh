#!/usr/bin/env bash
# Builds the workspace root filesystem (a minimal Debian with bash, git, coreutils, procps,
# iproute2 and ca-certificates) with debootstrap, and imports it as the Docker image
# `auto-swe-workspace:bookworm` when a Docker engine answers, together with the metadata
# sidecar's image `auto-swe-netadmin:bookworm`: only `sh`, `ip` and the libraries they load,
# taken from the same rootfs (a few MB, so creating the sidecar costs almost nothing even on a
# copy-based storage driver such as vfs).
#
# The same directory is the root of the `local` (bubblewrap) backend. Both are cached: a rootfs
# that already carries the stamp file is reused, and an image that already exists is kept.
#
# Usage: scripts/build-workspace-rootfs.sh [ROOTFS_DIR]
#   ROOTFS_DIR defaults to $AUTO_SWE_ROOTFS or /var/cache/auto-swe/rootfs/bookworm.
# Environment: AUTO_SWE_WORKSPACE_IMAGE (image name), AUTO_SWE_SIDECAR_IMAGE (sidecar image
# name), AUTO_SWE_DEBIAN_MIRROR (mirror URL).
set -euo pipefail

rootfs="${1:-${AUTO_SWE_ROOTFS:-/var/cache/auto-swe/rootfs/bookworm}}"
image="${AUTO_SWE_WORKSPACE_IMAGE:-auto-swe-workspace:bookworm}"
sidecar_image="${AUTO_SWE_SIDECAR_IMAGE:-auto-swe-netadmin:bookworm}"
mirror="${AUTO_SWE_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
stamp="$rootfs/.auto-swe-rootfs-v1"

if [ ! -e "$stamp" ]; then
  command -v debootstrap >/dev/null 2>&1 || {
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
  }
  rm -rf "$rootfs.partial"
  mkdir -p "$(dirname "$rootfs")"
  debootstrap --variant=minbase \
    --include=bash,git,coreutils,ca-certificates,procps,iproute2,tar \
    bookworm "$rootfs.partial" "$mirror" >"$rootfs.partial.log" 2>&1 || {
      tail -30 "$rootfs.partial.log" >&2
      exit 1
    }
  # Trim what a workspace never needs: package caches, docs, locales.
  rm -rf "$rootfs.partial"/var/cache/apt/archives/*.deb \
         "$rootfs.partial"/var/lib/apt/lists/* \
         "$rootfs.partial"/usr/share/doc/* "$rootfs.partial"/usr/share/man/* \
         "$rootfs.partial"/usr/share/locale/*
  # The workspace directory and an unprivileged user (uid 1000) for runtimes that want one.
  mkdir -p "$rootfs.partial/workspace"
  chmod 0777 "$rootfs.partial/workspace"
  if ! grep -q '^agent:' "$rootfs.partial/etc/passwd"; then
    echo 'agent:x:1000:1000:agent:/workspace:/bin/bash' >>"$rootfs.partial/etc/passwd"
    echo 'agent:x:1000:' >>"$rootfs.partial/etc/group"
  fi
  # No resolver, hostname or hosts of the build host stay in the image.
  : >"$rootfs.partial/etc/resolv.conf"
  printf '127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n' >"$rootfs.partial/etc/hosts"
  echo workspace >"$rootfs.partial/etc/hostname"
  touch "$rootfs.partial/.auto-swe-rootfs-v1"
  rm -rf "$rootfs"
  mv "$rootfs.partial" "$rootfs"
  rm -f "$rootfs.partial.log"
fi

# Trim what no workspace command needs (git's core commands use no perl). Idempotent, so a
# rootfs built before a trim was added gets it too. Smaller also means faster container
# creation on copy-based storage drivers such as vfs.
rm -rf "$rootfs"/usr/share/perl "$rootfs"/usr/lib/x86_64-linux-gnu/perl \
       "$rootfs"/usr/share/info "$rootfs"/usr/share/doc/* "$rootfs"/usr/share/man/* \
       "$rootfs"/var/cache/apt/*.bin "$rootfs"/var/cache/debconf/*-old \
       "$rootfs"/var/log/*.log

if command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1; then
  if ! docker image inspect "$image" >/dev/null 2>&1; then
    tar -C "$rootfs" --numeric-owner -c . \
      | docker import --change 'WORKDIR /workspace' --change 'CMD ["/bin/bash"]' - "$image" >/dev/null
  fi
  if ! docker image inspect "$sidecar_image" >/dev/null 2>&1; then
    tree="$(mktemp -d)"
    trap 'rm -rf "$tree"' EXIT
    mkdir -p "$tree/usr/bin" "$tree/tmp"
    ln -s usr/bin "$tree/bin"
    ln -s usr/bin "$tree/sbin"
    cp -a "$rootfs/usr/bin/ip" "$tree/usr/bin/ip"
    cp -a "$rootfs/usr/bin/dash" "$tree/usr/bin/sh"
    # Every library the two binaries load, resolved inside the rootfs, at the same paths.
    chroot "$rootfs" ldd /usr/bin/ip /usr/bin/dash \
      | awk '$1 ~ /^\// && $1 !~ /:$/ {print $1} $3 ~ /^\// {print $3}' | sort -u \
      | while read -r lib; do
          real="$(chroot "$rootfs" readlink -f "$lib")"
          mkdir -p "$tree$(dirname "$lib")" "$tree$(dirname "$real")"
          cp -a "$rootfs$real" "$tree$real"
          [ "$lib" = "$real" ] || ln -sf "$real" "$tree$lib"
        done
    tar -C "$tree" --numeric-owner -c . \
      | docker import --change 'CMD ["/bin/sh"]' - "$sidecar_image" >/dev/null
    rm -rf "$tree"
    trap - EXIT
  fi
fi
echo "$rootfs"
