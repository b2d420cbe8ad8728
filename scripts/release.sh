#!/usr/bin/env bash
# Builds the release binary with the Swift runtime linked in statically and lays out dist/:
#
#   dist/formwall         the binary; at run time it needs only glibc, libstdc++, libssl3 and zlib1g
#   dist/rules/*.rules    the policy the example configuration includes (docker/rules/: the catch-all of rules/,
#                         which refuses every file upload; none of the example routes of rules/ is on)
#   dist/formwall.conf    the example main configuration (docker/formwall.conf), which includes rules/*.rules
#
# Prints the binary's absolute path. docker/Dockerfile runs this very script, and copies the binary from
# the path below; Tests/e2e/test_packaging.py checks that both stay in step.
# Usage: scripts/release.sh
set -euo pipefail
cd "$(dirname "$0")/.."

DIST=dist
# Link-time optimisation over every module and the static Swift runtime (SwiftPM's --experimental-lto-mode):
# 13% fewer instructions per request and about 2% more requests/s (docs/performance.md, twenty-eighth session).
BUILD=(swift build -c release --static-swift-stdlib --experimental-lto-mode=full --product formwall)

"${BUILD[@]}"
bin_dir=$("${BUILD[@]}" --show-bin-path)

rm -rf "$DIST"
mkdir -p "$DIST/rules"
install -m 0755 "$bin_dir/formwall" "$DIST/formwall"
install -m 0644 docker/rules/*.rules "$DIST/rules/"
install -m 0644 docker/formwall.conf "$DIST/formwall.conf"

echo "$(pwd)/$DIST/formwall"
