#!/usr/bin/env bash
# Builds the workspace root filesystem (a minimal Debian with bash, git, coreutils, procps,
# iproute2 and ca-certificates) with debootstrap, and imports it as the Docker image
# `auto-swe-workspace:bookworm` when a Docker engine answers.
#
# The same directory is the root of the `local` (bubblewrap) backend. Both are cached: a rootfs
# that already carries the stamp file is reused, and an image that already exists is kept.
#
# Usage: scripts/build-workspace-rootfs.sh [ROOTFS_DIR]
#   ROOTFS_DIR defaults to $AUTO_SWE_ROOTFS or /var/cache/auto-swe/rootfs/bookworm.
# Environment: AUTO_SWE_WORKSPACE_IMAGE (image name), AUTO_SWE_DEBIAN_MIRROR (mirror URL).
set -euo pipefail

rootfs="${1:-${AUTO_SWE_ROOTFS:-/var/cache/auto-swe/rootfs/bookworm}}"
image="${AUTO_SWE_WORKSPACE_IMAGE:-auto-swe-workspace:bookworm}"
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
fi
echo "$rootfs"
