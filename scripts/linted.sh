# Sourced by scripts/cross.sh and scripts/windows-pass.sh: `linted CMD...`
# runs a cargo build whose workspace crate is compiled by clippy's driver,
# its lints (and rustc's) warnings as errors, as `cargo clippy -- -D
# warnings` holds Linux to. The dependencies are built once per target,
# by plain rustc: a clippy check beside the build compiled each of them a
# second time, the larger part of `make cross`. (CLIPPY_ARGS is how
# cargo-clippy hands its arguments to the driver.)
linted() {
  RUSTC_WORKSPACE_WRAPPER="$(rustc --print sysroot)/bin/clippy-driver" \
    CLIPPY_ARGS="-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__" "$@"
}
