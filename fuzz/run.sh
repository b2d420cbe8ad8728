#!/usr/bin/env bash
# Builds the libFuzzer targets — the multipart codec (FUZZ_SECONDS, default 60) and the content sniffer
# (SNIFF_FUZZ_SECONDS, default 30) — and runs them.
# Usage: fuzz/run.sh              (FUZZ_SECONDS=600 fuzz/run.sh for a longer run; see docs/fuzzing.md)
# Exits non-zero on any crash, trap, sanitizer report or leak; the reproducer is left in fuzz/build/.
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_TO_RUN="${FUZZ_SECONDS:-60}"
mkdir -p fuzz/build fuzz/corpus-run
# Seed the corpus with the in-repository python-multipart vectors (selector byte 1 = chunk size 1) and small
# hand-made inputs. The vectors are part of the repository: a missing folder is an error, not a silent skip.
SEEDS=Tests/MultipartTests/Fixtures/corpus/python-multipart
seed_count=0
[ -d "$SEEDS" ] && seed_count=$(find "$SEEDS" -maxdepth 1 -name '*.http' | wc -l)
if [ "$seed_count" -ne 30 ]; then
    echo "fuzz: expected 30 seed bodies in $SEEDS, found $seed_count" >&2
    exit 1
fi
for f in "$SEEDS"/*.http; do
    out="fuzz/corpus-run/seed-$(basename "$f")"
    [ -f "$out" ] || { printf '\x03' > "$out"; sed 's/--boundary/--fuzzB/g; s/----WebKitFormBoundary[A-Za-z0-9]*/--fuzzB/g' "$f" >> "$out"; }
done
printf '\x00multipart/form-data; boundary="a b"; x=y' > fuzz/corpus-run/seed-ct
printf '\x00Content-Disposition: form-data; name="a"; filename*=UTF-8'"''"'%%E2%%82%%AC\r\n' > fuzz/corpus-run/seed-cd
swiftc -sanitize=fuzzer,address -parse-as-library -O -g \
    -module-name MultipartFuzz \
    -I Sources/CLinux/include \
    Sources/Multipart/*.swift fuzz/MultipartFuzz.swift \
    -o fuzz/build/multipart-fuzz 2>&1 | grep -v "warning:" || true
test -x fuzz/build/multipart-fuzz
cd fuzz/build
export SWIFT_BACKTRACE=enable=no
./multipart-fuzz -max_total_time="$SECONDS_TO_RUN" -max_len=4096 -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 ../corpus-run 2>&1 | tail -15
echo "fuzz: multipart codec ran ${SECONDS_TO_RUN}s without findings"

cd ..
SNIFF_SECONDS="${SNIFF_FUZZ_SECONDS:-30}"
mkdir -p corpus-sniff
printf '\x03#!\r/bin/sh' > corpus-sniff/seed-shebang-cr
printf '\x05GIF89a<?php system(1); ?>' > corpus-sniff/seed-polyglot
printf '\x07PK\x03\x04' > corpus-sniff/seed-zip
cd ..
swiftc -sanitize=fuzzer,address -parse-as-library -O -g -module-name SniffFuzz \
    -Xcc -fmodule-map-file=Sources/COpenSSL/module.modulemap -Xcc -fmodule-map-file=Sources/CZlib/module.modulemap \
    -I Sources/COpenSSL -I Sources/CZlib Sources/Inspect/*.swift fuzz/SniffFuzz.swift -lcrypto -lz \
    -o fuzz/build/sniff-fuzz 2>&1 | grep -v "warning:" || true
test -x fuzz/build/sniff-fuzz
cd fuzz/build
./sniff-fuzz -max_total_time="$SNIFF_SECONDS" -max_len=8192 -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 ../corpus-sniff 2>&1 | tail -6
echo "fuzz: content sniffer ran ${SNIFF_SECONDS}s without findings"
