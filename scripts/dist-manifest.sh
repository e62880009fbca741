#!/usr/bin/env bash
# dist/manifest.json and dist/SHA256SUMS for what dist/ holds:
#   scripts/dist-manifest.sh VERSION
# One object per line in the manifest's lists (lua/mcp/install.lua reads
# any JSON layout). Both files are written beside and renamed into place.
set -euo pipefail
dist=${DIST_DIR:-dist}
cd "$(dirname "$0")/../$dist"
version=$1
entry() { # FILE PLATFORM ABI
  printf '    {"platform": "%s", "abi": "%s", "file": "%s", "size": %s, "sha256": "%s"}' \
    "$2" "$3" "$1" "$(stat -c %s "$1")" "$(sha256sum "$1" | cut -d' ' -f1)"
}
list() { # the entries of one list, comma-separated
  local first=1 line
  while read -r line; do
    [ $first -eq 1 ] || printf ',\n'
    first=0
    # shellcheck disable=SC2086
    entry $line
  done
  printf '\n'
}
{
  printf '{\n  "name": "lua-mcp",\n  "version": "%s",\n  "modules": [\n' "$version"
  for f in mcp-"$version"-*.so mcp-"$version"-*.dll; do
    [ -e "$f" ] || continue
    rest=${f#mcp-"$version"-}
    rest=${rest%.*}
    echo "$f ${rest%-*} ${rest##*-}"
  done | LC_ALL=C sort | list
  printf '  ],\n  "rocks": [\n'
  for f in lua-mcp-"$version"-1.*.rock; do
    [ -e "$f" ] || continue
    platform=${f#lua-mcp-"$version"-1.}
    echo "$f ${platform%.rock} all"
  done | LC_ALL=C sort | list
  printf '  ]\n}\n'
} >manifest.json.new
mv -f manifest.json.new manifest.json
find . -maxdepth 1 -type f ! -name SHA256SUMS ! -name '*.new' -printf '%f\n' | LC_ALL=C sort | xargs sha256sum >SHA256SUMS.new
mv -f SHA256SUMS.new SHA256SUMS
echo "dist: $(grep -c '"platform"' manifest.json) files in $dist/manifest.json and $dist/SHA256SUMS"
