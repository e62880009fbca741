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
# macOS modules are linked by the Rust toolchain's own lld (ld64.lld)
# against zig's stubs of libSystem rather than by zig's Mach-O linker,
# which ignores the list of symbols to export: the modules it linked
# exported every Rust symbol (9,882 on arm64) and were 8.7 MB against 4.6.
# lld does not know the arm64e.x1 targets zig's stubs name, written as
# arm64 in the copy it reads; the C library, libm and libiconv, which
# Rust's std names, are libSystem there (check_module refuses a symbol
# libSystem does not have).
ZIG_LIBC="$("$ZIG_TOOLS/bin/python" -c 'import ziglang, os; print(os.path.dirname(ziglang.__file__))')/lib/libc"
MACOS_LIBS=target/tools/macos-libs
if [ ! -f "$MACOS_LIBS/libSystem.tbd" ] || [ "$ZIG_LIBC/darwin/libSystem.tbd" -nt "$MACOS_LIBS/libSystem.tbd" ]; then
  mkdir -p "$MACOS_LIBS"
  sed 's/arm64e\.x1-macos/arm64-macos/g; s/arm64e\.x1-maccatalyst/arm64-maccatalyst/g' \
    "$ZIG_LIBC/darwin/libSystem.tbd" >"$MACOS_LIBS/libSystem.tbd.part"
  mv "$MACOS_LIBS/libSystem.tbd.part" "$MACOS_LIBS/libSystem.tbd"
  for lib in c m iconv; do ln -sfn libSystem.tbd "$MACOS_LIBS/lib$lib.tbd"; done
fi
flock -u "$zig_lock"
exec {zig_lock}>&-
export PATH="$PWD/$ZIG_TOOLS/bin:$PATH"
RUST_LLD="$(rustc --print sysroot)/lib/rustlib/$(rustc -vV | sed -n 's/^host: //p')/bin/rust-lld"

# The cargo arguments that link for TRIPLE as above, in LINK_ARGS: none
# but for macOS.
link_args() {
  LINK_ARGS=()
  case "$1" in
  *-apple-darwin)
    LINK_ARGS=(--config "target.$1.rustflags=['-C', 'linker=$RUST_LLD', '-C', 'linker-flavor=ld64.lld', '-C', 'link-arg=-L$PWD/$MACOS_LIBS']")
    ;;
  esac
}
