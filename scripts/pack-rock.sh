#!/usr/bin/env bash
# A binary rock for one platform from the modules in dist/:
#   scripts/pack-rock.sh PLATFORM VERSION ABI...
# writes dist/lua-mcp-VERSION-1.PLATFORM.rock, which `luarocks install`
# installs on that platform with no compiler: the module built for each
# ABI as lib/mcp/ABI.so (.dll), lua/rock/mcp.lua as the `mcp` that loads
# the one for the runtime, the Neovim loader and health check, the
# command-line tool, the types and the vimdoc. A rock is a zip of that
# tree with the rockspec and a rock_manifest (each file's MD5, by which
# LuaRocks knows what to deploy and later remove). The entries carry a
# fixed time and mode, so the same files give the same rock.
set -euo pipefail
cd "$(dirname "$0")/.."
dist=${DIST_DIR:-dist}
platform=$1 version=$2
shift 2
extension=so
[[ "$platform" == win32-* ]] && extension=dll
rock_version=$version-1

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/lib/mcp" "$stage/lua/mcp" "$stage/bin" "$stage/doc" "$stage/types"
for abi in "$@"; do
  cp "$dist/mcp-$version-$platform-$abi.$extension" "$stage/lib/mcp/$abi.$extension"
done
cp lua/rock/mcp.lua "$stage/lua/mcp.lua"
cp lua/mcp/install.lua lua/mcp/health.lua "$stage/lua/mcp/"
cp bin/lua-mcp "$stage/bin/lua-mcp"
cp doc/lua-mcp.txt "$stage/doc/"
cp lua/types/mcp.d.lua "$stage/types/"
cp "lua-mcp-$rock_version.rockspec" "$stage/"
find "$stage" -type f -exec chmod 644 {} +
chmod 755 "$stage"/lib/mcp/* "$stage/bin/lua-mcp"
lua5.4 scripts/rock-manifest.lua "$stage" >"$stage/rock_manifest"
chmod 644 "$stage/rock_manifest"

rock="$dist/lua-mcp-$rock_version.$platform.rock"
(
  cd "$stage"
  find . -type f -exec touch -d '1980-01-01 00:00:00' {} +
  find . -type f | LC_ALL=C sort | sed 's|^\./||' | TZ=UTC zip -q -X -D -9 "$stage/rock.zip" -@
)
mv -f "$stage/rock.zip" "$rock"
echo "pack: $rock ($*; $(stat -c %s "$rock") bytes)"
