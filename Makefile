# make demo   build the module and run the demo against the bundled server
# make check  the fast loop while working: fmt, clippy, the cargo tests, the
#             5.4 module and the busted suite on 5.4 without the #peer specs
#             (real servers, the official conformance suites) and the #slow ones
# make test   the whole suite, as CI runs it: installs what it needs, then
#             the cargo tests, the types, and busted once per runtime (5.1,
#             5.3, LuaJIT, 5.4); the #peer specs run on 5.4 only (the
#             runtime matters for values and strings, which the differential
#             and fuzz specs cover on every runtime)
# make build  build the module for lua5.4: target/release/libmcp.so, copied to ./mcp.so
#             (LUA=5.1|5.2|5.3|luajit builds for that runtime instead)
# make bench  benchmarks against the pure module and the TypeScript SDK (not part of test)
# make cross  build the module for macOS (arm64, x86_64), FreeBSD and Windows
#             and check each is a loadable Lua module there (part of test;
#             installs its toolchain under target/tools the first time)
# make windows the Windows pass (part of test): the Windows module loaded by
#             a Windows lua.exe and luajit.exe under Wine, running busted on
#             the specs that hold there (scripts/windows-pass.sh)
# make dist   the release: the module for every platform and Lua ABI, the
#             binary rocks, manifest.json and SHA256SUMS, in dist/
#             (scripts/dist.sh; `make dist PLATFORMS=linux-x86_64` for one)
# make dist-check  (part of test, beside the busted passes) the Linux rocks for Lua 5.1, LuaJIT and
#             5.4 built, installed with no cargo on PATH into fresh trees
#             and used, aarch64 under qemu-user; the loader; the refusals
#             of a corrupt download (scripts/dist-check.sh)
# make vimdoc doc/lua-mcp.txt from docs/ (checked by spec/docs_spec.lua)

.PHONY: build test-module demo check test test-rust test-lua test-types lua-bin bench cross windows dist dist-check vimdoc clean

LUA ?= 5.4
# The runtimes the suite runs on, 5.4 last: the module left at ./mcp.so is
# then the 5.4 one. (LANES below names each of them once.)
RUNTIMES ?= 5.1 5.3 luajit 5.4
BIN_5.1 = lua5.1
BIN_5.2 = lua5.2
BIN_5.3 = lua5.3
BIN_5.4 = lua5.4
BIN_luajit = luajit
FEATURE_5.1 = lua51
FEATURE_5.2 = lua52
FEATURE_5.3 = lua53
FEATURE_5.4 = lua54
FEATURE_luajit = luajit
# Every runtime builds in the one target directory: the dependencies are
# shared, and only mlua, mlua-sys and this crate differ between runtimes.
# PORTABLE=1 builds with the `portable` feature (see Cargo.toml): the
# implementations macOS and the BSDs run, wherever Linux can run them.
MODULE_FEATURES = --no-default-features --features $(FEATURE_$(LUA)),module$(if $(PORTABLE),$(comma)portable)
comma = ,

build:
	@test -n "$(FEATURE_$(LUA))" || { echo "LUA must be one of 5.1 5.2 5.3 5.4 luajit" >&2; exit 2; }
	cargo build --release --locked $(MODULE_FEATURES)
	sh scripts/install-module.sh target/release/libmcp.so mcp.so

# The module the specs load: as `build`, without link-time optimisation.
test-module:
	@test -n "$(FEATURE_$(LUA))" || { echo "LUA must be one of 5.1 5.2 5.3 5.4 luajit" >&2; exit 2; }
	cargo build --profile test-module --locked $(MODULE_FEATURES)
	sh scripts/install-module.sh target/test-module/libmcp.so mcp.so

demo:
	bash scripts/deps.sh demo
	$(MAKE) --no-print-directory build
	lua5.4 lua/examples/demo.lua

# The cargo tests link the system Lua (no `module` feature), built in the
# modules' profile so that they share its dependencies.
# The transport's own tests run once more with the `portable` feature.
# Clippy lints as the tests are built (LINTED: the crate compiled by
# clippy's driver, warnings as errors, as `cargo clippy --all-targets --
# -D warnings` would hold it), so every dependency is compiled once, not
# once checked for clippy and once built for the tests (scripts/linted.sh).
# With `portable`, the library and its tests: the feature changes nothing
# in the integration tests' own code.
LINTED = RUSTC_WORKSPACE_WRAPPER="$$(rustc --print sysroot)/bin/clippy-driver" CLIPPY_ARGS=-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__
test-rust:
	cargo fmt --check
	$(LINTED) cargo test --locked --profile test-module
	$(LINTED) cargo test --locked --profile test-module --features portable --lib -- transport::

# The types check, each runtime's module and the busted passes, in two
# lanes side by side (see scripts/test-lua.sh). 5.4+portable runs the
# stdio, async and host-survival specs with the PORTABLE=1 module. The
# 5.4 pass carries the #peer specs (the conformance suites and the SDKs'
# peers, about as long as the other three passes together), so it shares
# its lane with the short portable pass only (last run: 508 + 58 s
# against 192 + 195 + 186 s).
LANES ?= "5.4 5.4+portable" "luajit 5.1 5.3"
test-lua:
	sh scripts/test-lua.sh $(LANES)

lua-bin:
	@echo $(BIN_$(LUA))

# Each phase says what it cost, so that the suite's time is known by part.
PHASE = sh scripts/phase.sh
# cross and windows run beside the busted lanes (CROSS=1), as the
# install check does (DIST_CHECK=1): see scripts/test-lua.sh.
# The peers (npm, Python, the Rust peers, the Debian packages the cargo
# tests do not need) are installed beside the cargo tests: the downloads
# wait on the network and the cargo tests leave a core idle at times.
test:
	$(PHASE) deps bash scripts/deps.sh system
	mkdir -p target
	$(PHASE) peers bash scripts/deps.sh peers > target/peers.log 2>&1 & peers=$$!; \
	  $(PHASE) rust $(MAKE) --no-print-directory test-rust; rust=$$?; \
	  wait $$peers; installed=$$?; cat target/peers.log; \
	  [ $$rust -eq 0 ] && [ $$installed -eq 0 ]
	DIST_CHECK=1 CROSS=1 $(PHASE) lua $(MAKE) --no-print-directory test-lua

cross:
	bash scripts/cross.sh

windows:
	bash scripts/windows-pass.sh

PLATFORMS ?=
dist:
	bash scripts/dist.sh $(PLATFORMS)

# The artifacts the install check installs: the Linux ones, for the
# runtimes it installs them for.
dist-check:
	PROFILE=dist-check DIST_DIR=target/dist-check-artifacts ABIS="lua51 lua54 luajit" \
	  bash scripts/dist.sh linux-x86_64 linux-aarch64
	DIST_DIR=target/dist-check-artifacts bash scripts/dist-check.sh

vimdoc:
	lua5.4 scripts/vimdoc.lua > doc/lua-mcp.txt.part && mv doc/lua-mcp.txt.part doc/lua-mcp.txt

check:
	$(MAKE) --no-print-directory test-rust
	$(MAKE) --no-print-directory test-module LUA=5.4
	MCP_LUA=lua5.4 lua5.4 "$$(command -v busted)" -o utfTerminal --exclude-tags=peer,slow

# The types file and the examples, checked against each other by a LuaCATS
# checker (installed once from crates.io into target/tools if not on PATH;
# a debug build without debug information: it checks these files in a
# quarter of a second either way, and builds in half the time, and in 154 s
# of processor time instead of 197 without the information).
EMMYLUA_CHECK_VERSION = 0.25.1
test-types:
	@command -v emmylua_check >/dev/null || test -x target/tools/bin/emmylua_check || \
	  CARGO_PROFILE_DEV_DEBUG=false cargo install --debug --locked --quiet emmylua_check --version $(EMMYLUA_CHECK_VERSION) --root target/tools
	PATH="$$PWD/target/tools/bin:$$PATH" emmylua_check -c .emmyrc.json --warnings-as-errors lua/examples lua/types

bench:
	bash scripts/deps.sh bench
	$(MAKE) --no-print-directory build
	mkdir -p target/bench
	gcc -O2 -Wall -o target/bench/echo_server bench/echo_server.c
	gcc -O2 -Wall -o target/bench/pipe_rtt bench/pipe_rtt.c
	gcc -O2 -Wall -o target/bench/http_echo_server bench/http_echo_server.c
	gcc -O2 -Wall -o target/bench/http_rtt bench/http_rtt.c
	cargo build --quiet --release --locked --manifest-path bench/rmcp_client/Cargo.toml --target-dir target/bench/rmcp
	CARGO_PROFILE_RELEASE_OPT_LEVEL=3 cargo build --quiet --release --locked \
	  --manifest-path spec/peers/rmcp_tasks/Cargo.toml --target-dir target/bench/rmcp
	cargo test --release --locked --target-dir target/test-release --test allocations -- --nocapture \
	  | grep '^allocations per' > target/bench/allocations.txt
	lua5.4 bench/run.lua

clean:
	cargo clean
	rm -f mcp.so
