#!/bin/sh
# scripts/install-module.sh BUILT DEST - puts a freshly built module at DEST
# by writing a temporary file beside it and renaming it over DEST. A
# process that has DEST loaded (an editor, a running agent, a spec) maps
# the old file: rewriting it in place crashes that process with SIGSEGV
# or SIGBUS, even with identical bytes, while a rename leaves the old
# inode to whoever still maps it.
#
# BUILT names cargo's output as on Linux and the BSDs (libmcp.so); on macOS
# cargo writes libmcp.dylib instead, which is taken in its place. The
# module keeps the name mcp.so there too: Lua's default cpath asks for
# `?.so` on every Unix, macOS included.
set -eu
built=$1
dest=$2
if [ ! -e "$built" ] && [ -e "${built%.so}.dylib" ]; then
  built=${built%.so}.dylib
fi
temporary="$dest.new.$$"
trap 'rm -f "$temporary"' EXIT
cp "$built" "$temporary"
chmod 755 "$temporary"
mv -f "$temporary" "$dest"
trap - EXIT
