#!/usr/bin/env bash
# The Debian arm64 root the aarch64 install check runs in under qemu-user
# (scripts/dist-check.sh): Debian's own arm64 builds of Lua 5.1, 5.4 and
# LuaJIT with what they link, and dash as /bin/sh (LuaRocks reads
# /bin/sh's header to learn the processor it installs for; `qemu-aarch64
# -L ROOT` shows it this one). Downloaded through Debian's multiarch
# (scripts/deps.sh adds arm64 to dpkg's architectures) and unpacked
# under target/tools/arm64, never installed: nothing of the host changes.
# Made again when this list changes.
set -euo pipefail
cd "$(dirname "$0")/.."
PACKAGES=(lua5.1:arm64 lua5.4:arm64 luajit:arm64 libluajit-5.1-2:arm64 libluajit-5.1-common
  libc6:arm64 libreadline8:arm64 libtinfo6:arm64 libgcc-s1:arm64 dash:arm64)
root=target/tools/arm64
[ "$(cat "$root/packages" 2>/dev/null)" = "${PACKAGES[*]}" ] && exit 0
rm -rf "$root"
mkdir -p "$root/debs" "$root/root"
# apt's download user cannot write into a directory only root may.
chmod 777 "$root/debs"
(cd "$root/debs" && apt-get download -qq "${PACKAGES[@]}")
for deb in "$root"/debs/*.deb; do dpkg-deb -x "$deb" "$root/root"; done
ln -sf dash "$root/root/bin/sh"
rm -rf "$root/debs"
echo "${PACKAGES[*]}" >"$root/packages"
echo "arm64: Debian's Lua 5.1, 5.4 and LuaJIT under $root/root"
