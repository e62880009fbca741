# Sourced by scripts/cross.sh and scripts/dist.sh: the cross toolchain,
# installed the first time and kept. rustup's targets for the triples
# given, and zig (the cross linker, with every system's C library stubs,
# glibc's by version among them) with cargo-zigbuild, pinned, in a Python
# virtual environment under target/tools. Puts them on PATH and sets
# ZIG_LIBC to zig's copy of the C libraries' stubs.
#   . scripts/zig-toolchain.sh TRIPLE...
ZIG_TOOLS=target/tools/zig
ZIGLANG=0.17.1
CARGO_ZIGBUILD=0.24.1

# `make test` runs make cross and the install check side by side: the
# first to get here installs, under a lock, and the other waits for it
# (unlocked, one removed the toolchain the other was running).
mkdir -p target/tools
exec {zig_lock}>target/tools/zig.lock
flock "$zig_lock"
installed_targets=$(rustup target list --installed)
for triple in "$@"; do
  grep -qx "$triple" <<<"$installed_targets" || rustup target add "$triple"
done
if [ ! -x "$ZIG_TOOLS/bin/cargo-zigbuild" ] || [ "$(cat "$ZIG_TOOLS/pins" 2>/dev/null)" != "$ZIGLANG $CARGO_ZIGBUILD" ]; then
  rm -rf "$ZIG_TOOLS"
  python3 -m venv "$ZIG_TOOLS"
  "$ZIG_TOOLS/bin/pip" install --quiet --disable-pip-version-check "ziglang==$ZIGLANG" "cargo-zigbuild==$CARGO_ZIGBUILD"
  echo "$ZIGLANG $CARGO_ZIGBUILD" >"$ZIG_TOOLS/pins"
fi
flock -u "$zig_lock"
exec {zig_lock}>&-
export PATH="$PWD/$ZIG_TOOLS/bin:$PATH"
ZIG_LIBC="$("$ZIG_TOOLS/bin/python" -c 'import ziglang, os; print(os.path.dirname(ziglang.__file__))')/lib/libc"
