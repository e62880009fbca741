# make demo   build the module and run the demo against the bundled server
# make test   install what the suite needs, build, run cargo and busted specs
# make build  build the module for lua5.4: target/release/libmcp.so, copied to ./mcp.so
#             (LUA=5.1|5.2|5.3|luajit builds for that runtime instead, in target/lua-$(LUA))
# make bench  benchmarks against the pure module and the TypeScript SDK (not part of test)

.PHONY: build demo test test-rust test-lua bench clean

LUA ?= 5.4
FEATURE_5.1 = lua51
FEATURE_5.2 = lua52
FEATURE_5.3 = lua53
FEATURE_5.4 = lua54
FEATURE_luajit = luajit

build:
ifeq ($(LUA),5.4)
	cargo build --release --locked --features module
	cp target/release/libmcp.so mcp.so
else
	@test -n "$(FEATURE_$(LUA))" || { echo "LUA must be one of 5.1 5.2 5.3 5.4 luajit" >&2; exit 2; }
	cargo build --release --locked --no-default-features --features $(FEATURE_$(LUA)),module --target-dir target/lua-$(LUA)
	cp target/lua-$(LUA)/release/libmcp.so mcp.so
endif

demo:
	bash scripts/deps.sh demo
	$(MAKE) --no-print-directory build
	lua5.4 lua/examples/demo.lua

# The cargo tests link the system Lua (no `module` feature) and build in
# their own target dir, so they never overwrite the module.
test-rust:
	cargo fmt --check
	cargo clippy --locked --all-targets --target-dir target/test -- -D warnings
	cargo test --locked --target-dir target/test

test-lua: build
	lua5.4 "$$(command -v busted)" -o utfTerminal

test:
	bash scripts/deps.sh test
	$(MAKE) --no-print-directory test-rust
	$(MAKE) --no-print-directory test-lua

bench:
	bash scripts/deps.sh bench
	$(MAKE) --no-print-directory build
	mkdir -p target/bench
	gcc -O2 -Wall -o target/bench/echo_server bench/echo_server.c
	gcc -O2 -Wall -o target/bench/pipe_rtt bench/pipe_rtt.c
	lua5.4 bench/run.lua

clean:
	cargo clean
	rm -f mcp.so
