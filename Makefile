# make demo   build the module and run the demo against the bundled server
# make test   install what the suite needs, build, run cargo and busted specs
# make build  build the module: target/release/libmcp.so, copied to ./mcp.so

.PHONY: build demo test test-rust test-lua bench clean

build:
	cargo build --release --locked
	cp target/release/libmcp.so mcp.so

demo:
	bash scripts/deps.sh demo
	$(MAKE) --no-print-directory build
	lua5.4 lua/examples/demo.lua

# The cargo tests link the system Lua (no `module` feature) and build in
# their own target dir, so they never overwrite the module.
test-rust:
	cargo test --locked --no-default-features --features lua54 --target-dir target/test

test-lua: build
	lua5.4 "$$(command -v busted)" -o utfTerminal

test:
	bash scripts/deps.sh test
	$(MAKE) --no-print-directory test-rust
	$(MAKE) --no-print-directory test-lua

clean:
	cargo clean
	rm -f mcp.so
