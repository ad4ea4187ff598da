# Sandbox backends: bubblewrap for the `local` backend, a Docker engine for the `docker` backend,
# and the workspace rootfs/image both use. Tests of both backends fail instead of skipping.
if ! command -v bwrap >/dev/null 2>&1 || ! command -v dockerd >/dev/null 2>&1 \
   || ! command -v debootstrap >/dev/null 2>&1 || ! command -v ip >/dev/null 2>&1 \
   || ! command -v tar >/dev/null 2>&1; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
    bubblewrap docker.io debootstrap iproute2 tar >/dev/null
fi

# CI runs as root, and local sandboxes never run as host root: they run as this unprivileged
# account (see docs/sandbox.md, "Never host root").
if ! id auto-swe-sandbox >/dev/null 2>&1; then
  useradd --system --user-group --no-create-home --home-dir /nonexistent \
    --shell /usr/sbin/nologin auto-swe-sandbox
fi

# A Docker engine that runs inside an unprivileged CI container: vfs storage, no iptables, no
# default bridge (workspaces use `none` or `host` networking here). State is cached with the build.
if ! docker info >/dev/null 2>&1; then
  mkdir -p /var/cache/auto-swe/docker
  nohup dockerd --storage-driver=vfs --iptables=false --bridge=none \
    --data-root /var/cache/auto-swe/docker/data >/var/cache/auto-swe/docker/dockerd.log 2>&1 &
  for _ in $(seq 1 60); do
    docker info >/dev/null 2>&1 && break
    sleep 1
  done
  docker info >/dev/null 2>&1 || { tail -20 /var/cache/auto-swe/docker/dockerd.log >&2; exit 1; }
fi

# The workspace rootfs (debootstrap) and the image imported from it; both cached.
export AUTO_SWE_ROOTFS=/var/cache/auto-swe/rootfs/bookworm
export AUTO_SWE_WORKSPACE_IMAGE=auto-swe-workspace:bookworm
export AUTO_SWE_SIDECAR_IMAGE=auto-swe-netadmin:bookworm
bash scripts/build-workspace-rootfs.sh "$AUTO_SWE_ROOTFS" >/dev/null

export AUTO_SWE_REQUIRE_BWRAP=1
export AUTO_SWE_REQUIRE_DOCKER=1
