#!/usr/bin/env bash
# Writes the MCP registry's server.json for a release: the template with the version (the
# container image and the Go module of that version), and one MCPB package per bundle in DIR,
# with its SHA-256.
#
#   packaging/registry/fill.sh VERSION DIR > server.json
set -euo pipefail
version=${1:?usage: fill.sh VERSION DIR}
dir=${2:?usage: fill.sh VERSION DIR}
here=$(cd "$(dirname "$0")" && pwd)
node -e '
  const fs = require("fs"), crypto = require("crypto"), path = require("path");
  const [template, version, dir] = process.argv.slice(1);
  const v = version.replace(/^v/, "");
  const s = JSON.parse(fs.readFileSync(template, "utf8"));
  s.version = v;
  s.packages = s.packages.map(p =>
    p.registryType === "oci" ? {...p, identifier: p.identifier.replace(/:[^:]*$/, ":" + v)} :
    p.registryType === "go" ? {...p, version: "v" + v} : p);
  for (const f of fs.readdirSync(dir).filter(f => f.endsWith(".mcpb")).sort()) {
    const sha = crypto.createHash("sha256").update(fs.readFileSync(path.join(dir, f))).digest("hex");
    s.packages.push({
      registryType: "mcpb",
      identifier: `https://github.com/memory-mcp/memory-mcp/releases/download/v${v}/${f}`,
      fileSha256: sha,
      transport: {type: "stdio"},
    });
  }
  process.stdout.write(JSON.stringify(s, null, 2) + "\n");
' "$here/server.json" "$version" "$dir"
