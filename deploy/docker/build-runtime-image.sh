#!/usr/bin/env bash
# Builds tern's runtime image around a binary that is already built
# (Dockerfile.prebuilt), in seconds once the library layer is cached.
#
#   deploy/docker/build-runtime-image.sh BINARY TAG [podman|docker]
#
# Makes debian:bookworm-slim first when it is missing (make-base-image.sh).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
binary=${1:?usage: build-runtime-image.sh BINARY TAG [podman|docker]}
tag=${2:?usage: build-runtime-image.sh BINARY TAG [podman|docker]}
engine=${3:-${CONTAINER_ENGINE:-podman}}

[[ -x "$binary" ]] || { echo "build-runtime-image: no executable at $binary" >&2; exit 1; }
"$here/make-base-image.sh" --engine "$engine"

context=$(mktemp -d)
trap 'rm -rf "$context"' EXIT
cp "$here/Dockerfile.prebuilt" "$here/install-runtime.sh" "$here/tern-shape" "$context/"
cp -L "$binary" "$context/tern"
chmod 0755 "$context/tern"

revision=$(git -C "$here" rev-parse --short HEAD 2>/dev/null || echo unknown)
"$engine" build --quiet -f "$context/Dockerfile.prebuilt" -t "$tag" \
  --build-arg REVISION="$revision" "$context" >/dev/null
# A library the binary needs and the image lacks shows here, not in a pod.
if "$engine" run --rm --entrypoint ldd "$tag" /usr/local/bin/tern | grep 'not found'; then
  echo "build-runtime-image: $tag lacks the libraries above (deploy/docker/install-runtime.sh)" >&2
  exit 1
fi
echo "build-runtime-image: $tag ($("$engine" image inspect --format '{{.Size}}' "$tag" | awk '{printf "%.0f MB", $1/1e6}'))"
