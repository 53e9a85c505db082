#!/usr/bin/env bash
# Builds one Claude Desktop bundle (.mcpb) per platform with the official mcpb CLI.
#
#   packaging/mcpb/build.sh VERSION OUTDIR [GOOS/GOARCH ...]
#
# Default targets: darwin/arm64 darwin/amd64 windows/amd64 windows/arm64 linux/amd64
# linux/arm64. Needs Go, Node.js and mcpb (npm install @anthropic-ai/mcpb) on PATH.
set -euo pipefail
version=${1:?usage: build.sh VERSION OUTDIR [GOOS/GOARCH ...]}
out=${2:?usage: build.sh VERSION OUTDIR [GOOS/GOARCH ...]}
shift 2
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(darwin/arm64 darwin/amd64 windows/amd64 windows/arm64 linux/amd64 linux/arm64)
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
mkdir -p "$out"
out=$(cd "$out" && pwd)

for target in "${targets[@]}"; do
  goos=${target%/*} goarch=${target#*/}
  platform=$goos
  exe=memory-mcp
  [ "$goos" = windows ] && platform=win32 exe=memory-mcp.exe
  stage=$(mktemp -d)
  mkdir -p "$stage/server"
  (cd "$top" && CGO_ENABLED=0 GOEXPERIMENT=jsonv2 GOOS=$goos GOARCH=$goarch go build -trimpath \
    -ldflags "-s -w -X main.version=$version" -o "$stage/server/$exe" .)
  cp "$top/LICENSE" "$stage/"
  # The manifest with this version, for this platform only.
  node -e '
    const fs = require("fs");
    const [src, dst, version, platform] = process.argv.slice(1);
    const m = JSON.parse(fs.readFileSync(src, "utf8"));
    m.version = version.replace(/^v/, "");
    m.compatibility.platforms = [platform];
    fs.writeFileSync(dst, JSON.stringify(m, null, 2) + "\n");
  ' "$here/manifest.json" "$stage/manifest.json" "$version" "$platform"
  mcpb validate "$stage/manifest.json"
  mcpb pack "$stage" "$out/memory-mcp-${version#v}-$goos-$goarch.mcpb"
  rm -rf "$stage"
done
