#!/usr/bin/env bash
# The whole Formwall test suite, from a fresh clone:
#   1. installs what the tests need (Debian packages if missing, a Python venv),
#   2. builds debug and release,
#   3. runs the Swift suites (swift test),
#   4. runs the libFuzzer targets briefly,
#   5. runs the differential test against python-multipart,
#   6. runs the end-to-end suite (pytest) against the real binary.
# Usage: scripts/test.sh            (FUZZ_SECONDS=60 by default)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)

section() { printf '\n=== %s\n' "$*"; }

section "dependencies"
scripts/install-deps.sh

# shellcheck disable=SC1091
source "$ROOT/.venv/bin/activate"

section "swift build (debug and release)"
swift build
# The end-to-end tests run the release binary built as scripts/release.sh builds it: with link-time optimisation.
swift build -c release --experimental-lto-mode=full

section "swift test"
swift test 2>&1 | tee /tmp/formwall-swift-test.log
test "${PIPESTATUS[0]}" -eq 0

section "fuzzing"
FUZZ_SECONDS="${FUZZ_SECONDS:-60}" fuzz/run.sh

section "differential test against python-multipart"
python3 Tests/differential/differential.py --count "${DIFF_COUNT:-10000}" \
    --formwall "$ROOT/.build/release/formwall"

section "end-to-end (pytest)"
set +e
FORMWALL_BIN="$ROOT/.build/release/formwall" python3 -m pytest -q Tests/e2e
rc=$?
set -e
if [ "$rc" -eq 5 ]; then
    echo "pytest collected no tests: treating as failure" >&2
    exit 1
fi
exit "$rc"
