#!/usr/bin/env bash
# Makes the image `FROM debian:bookworm-slim` resolves to, without an image
# registry: debootstrap a minimal Debian 12 root file system from the same
# archive apt uses here, then `podman import` it under that name.
#
#   deploy/docker/make-base-image.sh [--force] [--mirror URL] [--engine podman|docker]
#
# Does nothing when the image is already there (unless --force). Needs root
# (debootstrap) and about a minute and 210 MB. With a reachable registry you
# do not need it: `podman pull debian:bookworm-slim` gives the real one.
set -euo pipefail

image=docker.io/library/debian:bookworm-slim
force=0
mirror=
engine=${CONTAINER_ENGINE:-podman}

usage() { sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; }

while [[ $# -gt 0 ]]; do
  case "$1" in
    --force) force=1 ;;
    --mirror) mirror=$2; shift ;;
    --mirror=*) mirror=${1#*=} ;;
    --engine) engine=$2; shift ;;
    --engine=*) engine=${1#*=} ;;
    -h|--help) usage; exit 0 ;;
    *) echo "make-base-image: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
  esac
  shift
done

if [[ $force -eq 0 ]] && "$engine" image inspect "$image" >/dev/null 2>&1; then
  echo "make-base-image: $image already present"
  exit 0
fi

# The Debian archive this host's apt already reaches (deb822 or one-line
# sources), so that an air-gapped site's mirror is used as is.
if [[ -z "$mirror" ]]; then
  mirror=$(grep -hsE '^URIs:' /etc/apt/sources.list.d/*.sources | awk '{print $2}' |
    grep -v -- '-security' | head -n1 || true)
fi
if [[ -z "$mirror" ]]; then
  mirror=$(grep -hsE '^deb ' /etc/apt/sources.list /etc/apt/sources.list.d/*.list |
    awk '{print $2}' | grep -v -- '-security' | head -n1 || true)
fi
mirror=${mirror:-http://deb.debian.org/debian}

if [[ $(id -u) -ne 0 ]]; then
  echo "make-base-image: debootstrap needs root" >&2
  exit 1
fi
command -v debootstrap >/dev/null || {
  echo "make-base-image: debootstrap missing (deploy/install-deps.sh installs it)" >&2
  exit 1
}

root=$(mktemp -d /var/tmp/tern-bookworm.XXXXXX)
trap 'rm -rf "$root"' EXIT

echo "make-base-image: debootstrap bookworm from $mirror"
start=$(date +%s)
debootstrap --variant=minbase bookworm "$root" "$mirror" >"$root.log" 2>&1 || {
  tail -n 20 "$root.log" >&2
  rm -f "$root.log"
  exit 1
}
rm -f "$root.log"

# What the registry's slim image leaves out: package lists and caches, and
# (via dpkg's path excludes) documentation that later installs would add.
rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin "$root"/var/cache/apt/archives/*.deb
cat >"$root/etc/dpkg/dpkg.cfg.d/docker-slim" <<'EOF'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
EOF

# `podman import` keeps no ENV: without PATH nothing in the image is found.
tar -C "$root" -c . | "$engine" import --quiet \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'CMD ["bash"]' - "$image" >/dev/null
echo "make-base-image: $image built in $(($(date +%s) - start)) s"
