#!/usr/bin/env bash
# Installs the official Durable Streams Rust server that `rill-bench http`
# measures rill's HTTP server against: crates.io's `durable-streams`
# 0.1.5, built with `cargo install --locked` into a cache directory
# (nothing system-wide, nothing in this repository). Prints the line to
# export so the benchmark finds it:
#
#   bench/scripts/install-ds-server.sh
#   export RILL_BENCH_DS_SERVER=...      # as printed
#   cargo run --release -p rill-bench -- http
#
# The build takes a few minutes on two cores. The benchmark starts the
# server on 127.0.0.1 only, with its data directory in the run's scratch
# directory, in its default durable (`--durability wal`) mode.
set -euo pipefail

VERSION="0.1.5"
DEST="${RILL_BENCH_DS_DIR:-$HOME/.cache/rill-bench/durable-streams-$VERSION}"

if [ ! -x "$DEST/bin/durable-streams-server" ]; then
    cargo install durable-streams --version "$VERSION" --locked --root "$DEST" --quiet
fi
echo "export RILL_BENCH_DS_SERVER=$DEST/bin/durable-streams-server"
