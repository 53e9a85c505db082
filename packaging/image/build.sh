#!/usr/bin/env bash
# Builds the container image with ko (no Docker engine needed).
#
#   packaging/image/build.sh VERSION BASE TARBALL [ko flags…]
#
# BASE is where the base image is pushed first (a registry you can write to, such as
# ghcr.io/memory-mcp/memory-mcp-base:VERSION, or a local `crane registry serve`): it is built
# from nothing (no distribution, no shell), holding only /data, owned by the non-root user
# 65532 and named in MEMORY_MCP_ROOT, for linux/amd64 and linux/arm64. The image, for the
# platforms in PLATFORMS (default both; a tarball holds one, so set PLATFORMS=linux/amd64 for
# it), is written to TARBALL; add --push=true to push it to KO_DOCKER_REPO (default
# ghcr.io/memory-mcp/memory-mcp).
# Needs ko and crane:
#   go install github.com/google/ko@v0.18.0
#   go install github.com/google/go-containerregistry/cmd/crane@v0.20.6
# CRANE_FLAGS (--insecure for a local registry) go to crane; KO_FLAGS to ko.
set -euo pipefail
version=${1:?usage: build.sh VERSION BASE TARBALL}
base=${2:?usage: build.sh VERSION BASE TARBALL}
tarball=${3:?usage: build.sh VERSION BASE TARBALL}
shift 3
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The base's one layer: an empty /data, mode 0700, owned by 65532.
(cd "$work" && mkdir data && chmod 700 data && tar --numeric-owner --owner=65532 --group=65532 -cf data.tar data)
manifests=()
for arch in amd64 arm64; do
  crane append ${CRANE_FLAGS:-} -f "$work/data.tar" -t "$base-$arch" >/dev/null
  crane mutate ${CRANE_FLAGS:-} "$base-$arch" --env MEMORY_MCP_ROOT=/data --set-platform "linux/$arch" -t "$base-$arch" >/dev/null
  manifests+=(-m "$base-$arch")
done
crane index append ${CRANE_FLAGS:-} "${manifests[@]}" -t "$base" >/dev/null

cd "$top"
VERSION=$version KO_DOCKER_REPO=${KO_DOCKER_REPO:-ghcr.io/memory-mcp/memory-mcp} KO_DEFAULTBASEIMAGE=$base \
  ko build . --bare --push=false --tarball "$tarball" --sbom none --tags "${version#v}" \
  --platform "${PLATFORMS:-linux/amd64,linux/arm64}" \
  --image-user 65532 \
  --image-label io.modelcontextprotocol.server.name=io.github.memory-mcp/memory-mcp \
  --image-label org.opencontainers.image.source=https://github.com/memory-mcp/memory-mcp \
  --image-label org.opencontainers.image.version="${version#v}" \
  ${KO_FLAGS:-} "$@"
