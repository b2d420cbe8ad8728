#!/usr/bin/env bash
# Builds the libFuzzer targets — the multipart codec (FUZZ_SECONDS, default 60), the content sniffer
# (SNIFF_FUZZ_SECONDS, default 30), the request body path (REQUEST_FUZZ_SECONDS, default 30), the whole
# exchange of one connection (EXCHANGE_FUZZ_SECONDS, default 30), the TLS server session (TLS_FUZZ_SECONDS,
# default 30), the metadata disarmers (DISARM_FUZZ_SECONDS, default 30), the archive inspector
# (ARCHIVE_FUZZ_SECONDS, default 30) and the upstream's response (RESPONSE_FUZZ_SECONDS, default 30) — and runs them.
# Usage: fuzz/run.sh              (FUZZ_SECONDS=600 fuzz/run.sh for a longer run; see docs/fuzzing.md)
# Exits non-zero on any crash, trap, sanitizer report or leak; the reproducer is left in fuzz/build/.
set -euo pipefail
cd "$(dirname "$0")/.."

# Compiles harness fuzz/$2.swift with Sources/Inspect (the sniffer, archive inspector and disarmers) and the
# CLinux shim (the sniffer's substring search is its cl_find_delimiter) into fuzz/build/$1; run from the
# repository root, after the shim's object is built below.
build_inspect_fuzzer() {
    rm -f "fuzz/build/$1"
    swiftc -sanitize=fuzzer,address -parse-as-library -O -g -module-name "$2" \
        -Xcc -fmodule-map-file=Sources/COpenSSL/module.modulemap -Xcc -fmodule-map-file=Sources/CZlib/module.modulemap \
        -I Sources/CLinux/include -I Sources/COpenSSL -I Sources/CZlib Sources/Inspect/*.swift "fuzz/$2.swift" \
        fuzz/build/multipart-shim.o -lcrypto -lz \
        -o "fuzz/build/$1" 2>&1 | grep -v "warning:" || true
    test -x "fuzz/build/$1"
}
# Runs fuzzer fuzz/build/$1 for $2 seconds on inputs of at most $3 bytes (a $4 s timeout per input) over corpus
# fuzz/$5, printing the last $7 lines of its report (default 6), then "$6 ran ...". From fuzz/build; environment
# variables set on the call reach the fuzzer. With pipefail a finding (the fuzzer's non-zero exit) stops the script.
run_fuzzer() {
    "./$1" -max_total_time="$2" -max_len="$3" -timeout="$4" -rss_limit_mb=2048 -print_final_stats=1 "../$5" 2>&1 \
        | tail -"${7:-6}"
    echo "fuzz: $6 ran ${2}s without findings"
}
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
# The parser's delimiter search (cl_find_delimiter) is C, in the CLinux shim; the Inspect fuzzers link it too.
clang -O1 -g -fsanitize=fuzzer-no-link,address -I Sources/CLinux/include -c Sources/CLinux/shim.c \
    -o fuzz/build/multipart-shim.o
rm -f fuzz/build/multipart-fuzz   # a stale binary must not pass the check below
swiftc -sanitize=fuzzer,address -parse-as-library -O -g -package-name formwall \
    -module-name MultipartFuzz \
    -I Sources/CLinux/include \
    Sources/Multipart/*.swift fuzz/MultipartFuzz.swift fuzz/build/multipart-shim.o \
    -o fuzz/build/multipart-fuzz 2>&1 | grep -v "warning:" || true
test -x fuzz/build/multipart-fuzz
cd fuzz/build
export SWIFT_BACKTRACE=enable=no
run_fuzzer multipart-fuzz "$SECONDS_TO_RUN" 4096 10 corpus-run "multipart codec" 15

cd ..
SNIFF_SECONDS="${SNIFF_FUZZ_SECONDS:-30}"
mkdir -p corpus-sniff
printf '\x03#!\r/bin/sh' > corpus-sniff/seed-shebang-cr
printf '\x05GIF89a<?php system(1); ?>' > corpus-sniff/seed-polyglot
printf '\x07PK\x03\x04' > corpus-sniff/seed-zip
cd ..
build_inspect_fuzzer sniff-fuzz SniffFuzz
cd fuzz/build
run_fuzzer sniff-fuzz "$SNIFF_SECONDS" 8192 10 corpus-sniff "content sniffer"

# The request body path without sockets: head parser → framing → form / urlencoded stage → policy → encoder.
# The library modules are compiled as static libraries (the stages import them), the stages with the harness.
cd ../..
REQUEST_SECONDS="${REQUEST_FUZZ_SECONDS:-30}"
B=fuzz/build/request
mkdir -p "$B" fuzz/corpus-request
FLAGS=(-sanitize=fuzzer,address -parse-as-library -O -g -package-name formwall)   # one package: `package` symbols cross modules
INCLUDES=(-I Sources/CLinux/include -I Sources/COpenSSL -I Sources/CZlib -I "$B"
          -Xcc -fmodule-map-file=Sources/COpenSSL/module.modulemap -Xcc -fmodule-map-file=Sources/CZlib/module.modulemap)
for module in Multipart HTTP1 Inspect Rules Quarantine Reactor; do
    rm -f "$B/lib$module.a"   # a failed compile must not leave an old library to link
    swiftc "${FLAGS[@]}" "${INCLUDES[@]}" -emit-library -static -emit-module -module-name "$module" \
        -emit-module-path "$B/$module.swiftmodule" -o "$B/lib$module.a" "Sources/$module"/*.swift 2>&1 \
        | grep -v "warning:" || true
    test -f "$B/lib$module.a"
done
clang -O1 -g -fsanitize=address -I Sources/CLinux/include -c Sources/CLinux/shim.c -o "$B/shim.o"
rm -f fuzz/build/request-fuzz
swiftc "${FLAGS[@]}" "${INCLUDES[@]}" -module-name RequestPathFuzz \
    fuzz/RequestPathFuzz.swift Sources/Proxy/FormStage.swift Sources/Proxy/UrlencodedStage.swift \
    Sources/Proxy/EvaluatorSlot.swift Sources/Proxy/RequestPools.swift \
    -L "$B" -lRules -lQuarantine -lInspect -lMultipart -lHTTP1 -lReactor "$B/shim.o" -lcrypto -lz \
    -o fuzz/build/request-fuzz 2>&1 | grep -v "warning:" || true
test -x fuzz/build/request-fuzz
# Seeds: the crash shapes (bytes after the close delimiter, boundary tricks), chunked, urlencoded, a huge length.
python3 - fuzz/corpus-request <<'PY'
import sys
out = sys.argv[1]
parts = (b'--B\r\nContent-Disposition: form-data; name="title"\r\n\r\nhello\r\n'
         b'--B\r\nContent-Disposition: form-data; name="doc"; filename="a.txt"\r\n'
         b'Content-Type: text/plain\r\n\r\nplain text body')
tails = [b"\r\n--B--\r\n", b"\r\n--B--\r\nepilogue\r\n", b"\r\n--B----\r\n", b"\r\n--B-- \t \r\n", b"\r\n--B--x",
         b'\r\n--B--\r\n--B\r\nContent-Disposition: form-data; name="title"\r\n\r\nsmuggled\r\n--B--\r\n', b"\r\n--B--"]
cts = [b"Content-Type: multipart/form-data; boundary=B\r\n",
       b"Content-Type: multipart/form-data; boundary=B\r\nContent-Type: multipart/form-data; boundary=C\r\n",
       b"Content-Type: multipart/form-data; boundary*=utf-8''C; boundary=B\r\n",
       b'Content-Type: multipart/form-data; charset="x; boundary=C"; boundary=B\r\n']
seeds = []
for i, t in enumerate(tails):
    body = parts + t
    for j, ct in enumerate(cts):
        head = b"POST /up HTTP/1.1\r\nHost: a\r\n" + ct
        seeds.append(bytes([i + j, 1 + 7 * i]) + head + b"Content-Length: %d\r\n\r\n" % len(body) + body)
        chunks = b"%x\r\n" % len(parts) + parts + b"\r\n" + b"%x\r\n" % len(t) + t + b"\r\n0\r\n\r\n"
        seeds.append(bytes([i + j + 1, 3 + 5 * j]) + head + b"Transfer-Encoding: chunked\r\n\r\n" + chunks)
form = b"title=abc&note=12&x=%41"
seeds.append(b"\x01\x02POST /up HTTP/1.1\r\nHost: a\r\nContent-Type: application/x-www-form-urlencoded\r\n"
             b"Content-Length: %d\r\n\r\n" % len(form) + form)
seeds.append(b"\x00\x05POST /up HTTP/1.1\r\nHost: a\r\nContent-Type: multipart/form-data; boundary=B\r\n"
             b"Content-Length: 18446744073709551615\r\n\r\n")
for n, seed in enumerate(seeds):
    with open(f"{out}/seed-{n:03d}", "wb") as f:
        f.write(seed)
PY
cd fuzz/build
run_fuzzer request-fuzz "$REQUEST_SECONDS" 4096 10 corpus-request "request body path"

# The whole request path of one connection: ConnectionMachine driven by ExchangeRig (a scripted upstream, a fake
# clock), over every library module plus the machine's files. Policies: rules/*.rules and generated ones.
EXCHANGE_SECONDS="${EXCHANGE_FUZZ_SECONDS:-30}"
cd ../..
B=fuzz/build/request
swiftc "${FLAGS[@]}" "${INCLUDES[@]}" -emit-library -static -emit-module -module-name Audit \
    -emit-module-path "$B/Audit.swiftmodule" -o "$B/libAudit.a" Sources/Audit/*.swift 2>&1 \
    | grep -v "warning:" || true
test -f "$B/libAudit.a"
rm -f fuzz/build/exchange-fuzz   # a failed compile must not leave an old binary to run
# Every file of Sources/Proxy except the socket drivers (the machine imports no socket code).
PURE_PROXY=()
for f in Sources/Proxy/*.swift; do
    case "$(basename "$f")" in
        ClientConnection.swift|UpstreamConnection.swift|Worker.swift|ProxyServer.swift|ProxyServer+Admin.swift) ;;
        EchoUpstream.swift|AdminServer.swift|AdminServer+Readiness.swift) ;;
        *) PURE_PROXY+=("$f") ;;
    esac
done
swiftc "${FLAGS[@]}" "${INCLUDES[@]}" -module-name ExchangeFuzz \
    fuzz/ExchangeFuzz.swift fuzz/ExchangeMutator.swift Tests/TestZlib/Deflate.swift "${PURE_PROXY[@]}" \
    -L "$B" -lAudit -lRules -lQuarantine -lInspect -lMultipart -lHTTP1 -lReactor "$B/shim.o" -lcrypto -lz \
    -o fuzz/build/exchange-fuzz 2>&1 | grep -v "warning:" || true
test -x fuzz/build/exchange-fuzz
mkdir -p fuzz/corpus-exchange
# Seeds: the request-path seeds (policy byte, read size) with an upstream script byte in between.
for f in fuzz/corpus-request/seed-*; do
    out="fuzz/corpus-exchange/$(basename "$f")"
    [ -f "$out" ] || { head -c 1 "$f"; printf '\x00'; tail -c +2 "$f"; } > "$out"
done
printf '\x21\x04\x00POST /up HTTP/1.1\r\nHost: a\r\nContent-Type: multipart/form-data; boundary=B\r\nContent-Length: 52\r\n\r\n--B\r\nContent-Disposition: form-data; name="title"\r\n\r\nx\r\n--B--\r\nepilogue' \
    > fuzz/corpus-exchange/seed-early-head
printf '\x20\x41\x01GET / HTTP/1.1\r\nHost: a\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n' \
    > fuzz/corpus-exchange/seed-pipelined-stale
# gzip and deflate bodies (the mutator's encoding class): whole, with a long run of zeros (over the generated
# policies' compression-ratio-max 8), cut short, with a wrong byte, with bytes after the stream.
python3 - fuzz/corpus-exchange <<'PY'
import gzip, sys, zlib
out = sys.argv[1]
form = (b'--B\r\nContent-Disposition: form-data; name="title"\r\n\r\nhello\r\n'
        b'--B\r\nContent-Disposition: form-data; name="doc"; filename="a.txt"\r\nContent-Type: text/plain\r\n\r\n')
bodies = {"plain": form + b"plain text body\r\n--B--\r\n",
          "bomb": form + b"\0" * 200000 + b"\r\n--B--\r\n",
          "bad-tail": form + b"x" * 3000 + b"\r\n--B\r\nno colon\r\n\r\n\r\n--B--\r\n"}
for name, body in bodies.items():
    for coding, packed in (("gzip", gzip.compress(body, mtime=0)), ("deflate", zlib.compress(body))):
        for damage, stream in (("whole", packed), ("cut", packed[:-5]), ("trailing", packed + b"\x1f\x8b"),
                               ("flip", packed[:len(packed) // 2] + bytes([packed[len(packed) // 2] ^ 0x40])
                                        + packed[len(packed) // 2 + 1:])):
            head = (b"POST / HTTP/1.1\r\nHost: a\r\nContent-Type: multipart/form-data; boundary=B\r\n"
                    b"Content-Encoding: " + coding.encode() + b"\r\nContent-Length: %d\r\n\r\n" % len(stream))
            for read in (0, 1, 7, 200):
                with open(f"{out}/seed-{coding}-{name}-{damage}-{read}", "wb") as f:
                    f.write(bytes([0x23, 0x00, read]) + head + stream)
PY
cd fuzz/build
FORMWALL_RULES_DIR=../../rules run_fuzzer exchange-fuzz "$EXCHANGE_SECONDS" 4096 20 corpus-exchange "whole exchange path"

# The TLS transport: arbitrary client flights (and a real client's bytes corrupted in transit) to a server
# session over an in-memory socket. The TLS sources are compiled with the harness; Reactor is the static library.
TLS_SECONDS="${TLS_FUZZ_SECONDS:-30}"
cd ../..
B=fuzz/build/request
rm -f fuzz/build/tls-fuzz
swiftc "${FLAGS[@]}" "${INCLUDES[@]}" -module-name TLSFuzz fuzz/TLSFuzz.swift Sources/TLS/*.swift \
    -L "$B" -lReactor "$B/shim.o" -lssl -lcrypto -o fuzz/build/tls-fuzz 2>&1 | grep -v "warning:" || true
test -x fuzz/build/tls-fuzz
# Certificates (a CA, a.test/localhost, b.test/*.b.test, a client) and seed ClientHellos from Python's ssl module.
CERTS=fuzz/build/tls-certs
if [ ! -f "$CERTS/client.pem" ]; then
    mkdir -p "$CERTS"
    chmod 700 "$CERTS"
    (
        umask 077
        cd "$CERTS"
        ec=(-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes)
        openssl req -x509 "${ec[@]}" -keyout ca.key -out ca.pem -subj /CN=Fuzz-CA -days 3650 2>/dev/null
        for leaf in "a:DNS:a.test,DNS:localhost" "b:DNS:b.test,DNS:*.b.test" "client:DNS:client.test"; do
            name="${leaf%%:*}"
            openssl req -new "${ec[@]}" -keyout "$name.key" -out "$name.csr" -subj "/CN=$name.test" 2>/dev/null
            printf 'subjectAltName=%s\n' "${leaf#*:}" > "$name.ext"
            openssl x509 -req -in "$name.csr" -CA ca.pem -CAkey ca.key -CAcreateserial -days 3650 \
                -extfile "$name.ext" -out "$name.pem" 2>/dev/null
        done
    )
fi
mkdir -p fuzz/corpus-tls
python3 - fuzz/corpus-tls <<'PY'
import ssl, sys
out = sys.argv[1]
def hello(name, maximum, alpn):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.maximum_version = maximum
    if alpn:
        ctx.set_alpn_protocols(alpn)
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    conn = ctx.wrap_bio(incoming, outgoing, server_hostname=name)
    try:
        conn.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return outgoing.read()
n = 0
for name in ["a.test", "x.b.test", "unknown.test", None]:
    for maximum in [ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3]:
        for alpn in [["http/1.1"], ["h2"], None]:
            data = hello(name, maximum, alpn)
            for mode in (0x00, 0x13, 0x27, 0xf1):
                with open(f"{out}/seed-hello-{n:03d}", "wb") as f:
                    f.write(bytes([mode]) + data)
                n += 1
for i, mode in enumerate((0x08, 0x0c, 0x39, 0xf8)):
    with open(f"{out}/seed-mitm-{i}", "wb") as f:
        f.write(bytes([mode]) + b"\x00" * (40 + 300 * i) + b"\x01")
with open(f"{out}/seed-plain-http", "wb") as f:
    f.write(b"\x00GET / HTTP/1.1\r\nHost: a\r\n\r\n")
PY
cd fuzz/build
TLS_FUZZ_CERTS=tls-certs run_fuzzer tls-fuzz "$TLS_SECONDS" 8192 20 corpus-tls "TLS server session"

# The disarmers (JPEG, PNG, GIF, WebP, SVG strip and reject): whole and chunked runs must agree and never trap.
cd ../..
DISARM_SECONDS="${DISARM_FUZZ_SECONDS:-30}"
mkdir -p fuzz/corpus-disarm
python3 - fuzz/corpus-disarm <<'PY'
import struct, sys, zlib
out = sys.argv[1]
def seg(m, p): return bytes([0xFF, m]) + struct.pack(">H", len(p) + 2) + p
tiff = b"MM\x00\x2a\x00\x00\x00\x08" + struct.pack(">H", 1) + struct.pack(">HHII", 0x8825, 4, 1, 26) + b"\0\0\0\0"
jpeg = (b"\xff\xd8" + seg(0xE0, b"JFIF\0\1\1\0\0\1\0\1\0\0") + seg(0xE1, b"Exif\0\0" + tiff) + seg(0xFE, b"hi")
        + seg(0xE2, b"ICC_PROFILE\0\1\1ab") + seg(0xEE, b"Adobe\0d\0\0\0\0\1") + seg(0xDB, b"\0" + bytes(range(64)))
        + seg(0xC0, b"\x08\0\x10\0\x10\1\1\x11\0") + seg(0xDA, b"\1\1\0\0\x3f\0") + b"\x12\xff\x00\x34\xff\xd0\x56\xff\xd9")
def ch(t, d): return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d))
png = (b"\x89PNG\r\n\x1a\n" + ch(b"IHDR", struct.pack(">II", 1, 1) + b"\x08\x02\0\0\0") + ch(b"tEXt", b"Comment\0x")
       + ch(b"eXIf", b"MM\0*") + ch(b"IDAT", zlib.compress(b"\0\0\0\0")) + ch(b"IEND", b""))
svg = (b'<?xml version="1.0"?><!DOCTYPE svg [<!ENTITY a "b">]><svg onload="x" xmlns:xlink="http://www.w3.org/1999/xlink">'
       b'<!-- c --><script><![CDATA[ a<b ]]></script><a xlink:href="&#106;avascript:1"><set attributeName="href" to="x"/>'
       b'</a><foreignObject><p/></foreignObject><use href="#a"/><style><![CDATA[ a<b ]]></style></svg>')
def sub(d): return b"".join(bytes([len(d[i:i + 255])]) + d[i:i + 255] for i in range(0, len(d), 255)) + b"\0"
gif = (b"GIF89a\1\0\1\0\x80\0\0" + bytes(6) + b"\x21\xfe" + sub(b"hi") + b"\x21\xff\x0bNETSCAPE2.0\x03\1\0\0\0"
       + b"\x21\xff\x0bXMP DataXMP" + sub(b"<x/>") + b"\x21\xf9\4\1\x0a\0\0\0" + b"\x2c" + bytes(4) + b"\1\0\1\0\0"
       + b"\2\2\x4c\1\0\x3b")
def rc(t, d): return t + struct.pack("<I", len(d)) + d + (b"\0" if len(d) % 2 else b"")
icc = bytearray(144) + b"desc\0\0\0\0sRGB"
icc[0:4] = struct.pack(">I", len(icc)); icc[36:40] = b"acsp"; icc[128:144] = struct.pack(">I4sII", 1, b"desc", 144, 12)
vp8 = rc(b"VP8 ", b"\x30\1\0\x9d\1\x2a\1\0\1\0\x11")
body = (rc(b"VP8X", b"\x3e" + bytes(9)) + rc(b"ICCP", bytes(icc)) + rc(b"ANIM", bytes(6)) + rc(b"EXIF", b"MM\0*")
        + rc(b"ANMF", bytes(16) + rc(b"ALPH", b"\0\xff") + vp8) + rc(b"XMP ", b"<x/>") + rc(b"abcd", b"z"))
webp = b"RIFF" + struct.pack("<I", len(body) + 4) + b"WEBP" + body
for name, kind, data in [("jpeg", 0, jpeg), ("png", 1, png), ("svg", 2, svg), ("svg-reject", 0x82, svg),
                         ("gif", 3, gif), ("webp", 4, webp)]:
    for chunk in (1, 7, 255):
        with open(f"{out}/seed-{name}-{chunk}", "wb") as f:
            f.write(bytes([kind, chunk]) + data)
PY
build_inspect_fuzzer disarm-fuzz DisarmFuzz
cd fuzz/build
run_fuzzer disarm-fuzz "$DISARM_SECONDS" 4096 10 corpus-disarm "metadata disarmers"

# The archive inspector (ZIP, gzip, tar, tar.gz, nested): whole and chunked runs must agree and never trap.
cd ../..
ARCHIVE_SECONDS="${ARCHIVE_FUZZ_SECONDS:-30}"
mkdir -p fuzz/corpus-archive
python3 - fuzz/corpus-archive <<'PY'
import gzip, io, struct, sys, tarfile, zipfile
out = sys.argv[1]
class Unseekable(io.RawIOBase):   # zipfile writes data descriptors to a stream it cannot seek back in
    def __init__(self): self.buf = bytearray()
    def writable(self): return True
    def write(self, b): self.buf += b; return len(b)
def zip_of(entries, method=zipfile.ZIP_DEFLATED, stream=False, zip64=False):
    raw = Unseekable() if stream else io.BytesIO()
    with zipfile.ZipFile(raw, "w", method) as z:
        for name, data in entries:
            info = zipfile.ZipInfo(name, (2020, 1, 1, 0, 0, 0))
            info.compress_type = method            # a ZipInfo's own default is stored
            with z.open(info, "w", force_zip64=zip64) as f:
                f.write(data)
    return bytes(raw.buf if stream else raw.getvalue())
def tar_of(entries, fmt=tarfile.USTAR_FORMAT):
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=fmt) as t:
        for name, data, kind, link in entries:
            info = tarfile.TarInfo(name)
            info.type, info.linkname, info.size, info.mtime = kind, link, len(data), 0
            t.addfile(info, io.BytesIO(data) if kind == tarfile.REGTYPE else None)
    return raw.getvalue()
text = b"hello archive\n" * 20
inner = zip_of([("inner.txt", text)])
plain_zip = zip_of([("a.txt", text), ("dir/", b""), ("b.bin", bytes(range(256)))])
encrypted = bytearray(zip_of([("secret.txt", text)], zipfile.ZIP_STORED))
encrypted[6] |= 1                                  # the local header's general purpose flag: encrypted
cd = encrypted.rfind(b"PK\x01\x02")
encrypted[cd + 8] |= 1                             # and the central directory's
tars = [("a.txt", text, tarfile.REGTYPE, ""), ("link", b"", tarfile.SYMTYPE, "../../etc/passwd"),
        ("d/", b"", tarfile.DIRTYPE, "")]
seeds = {
    "zip": (0, plain_zip),
    "zip-stored": (0, zip_of([("a.txt", text)], zipfile.ZIP_STORED)),
    "zip-descriptor": (0, zip_of([("a.txt", text), ("b.txt", b"x" * 300)], stream=True)),
    "zip64": (0, zip_of([("a.txt", text)], zip64=True)),
    "zip-nested": (0, zip_of([("inner.zip", inner), ("run.sh", b"#!/bin/sh\necho\n")])),
    "zip-encrypted": (0, bytes(encrypted)),
    "zip-bomb": (0, zip_of([("zeros", b"\0" * 40000)])),
    "zip-empty": (0, zip_of([])),
    "gzip": (1, gzip.compress(text, mtime=0)),
    "gzip-tar": (1, gzip.compress(tar_of(tars), mtime=0)),
    "tar": (2, tar_of(tars)),
    "tar-pax": (2, tar_of([("p" * 120 + ".txt", text, tarfile.REGTYPE, "")], tarfile.PAX_FORMAT)),
    "tar-gnu": (2, tar_of([("g" * 120 + ".txt", text, tarfile.REGTYPE, "")], tarfile.GNU_FORMAT)),
    "tar-zip": (2, tar_of([("in.zip", inner, tarfile.REGTYPE, "")])),
    "tgz": (3, gzip.compress(tar_of(tars + [("x.zip", inner, tarfile.REGTYPE, "")]), mtime=0)),
}
for name, (fmt, data) in seeds.items():
    assert len(data) <= 16000, name
    for limits in (0x00, 0x04 | 0x08 | 0x40):      # the defaults; small limits (2 entries at most, depth 4)
        for chunk in (1, 9, 255):
            with open(f"{out}/seed-{name}-{limits:02x}-{chunk}", "wb") as f:
                f.write(bytes([fmt | limits, chunk]) + data)
PY
build_inspect_fuzzer archive-fuzz ArchiveFuzz
cd fuzz/build
run_fuzzer archive-fuzz "$ARCHIVE_SECONDS" 16384 10 corpus-archive "archive inspector"

# The response half of an exchange: the upstream's bytes, in pieces of any size, against a fixed set of requests.
# Built like the exchange target (the static libraries above and the machine's files, PURE_PROXY).
cd ../..
RESPONSE_SECONDS="${RESPONSE_FUZZ_SECONDS:-30}"
rm -f fuzz/build/response-fuzz
swiftc "${FLAGS[@]}" "${INCLUDES[@]}" -module-name ResponseFuzz fuzz/ResponseFuzz.swift "${PURE_PROXY[@]}" \
    -L "$B" -lAudit -lRules -lQuarantine -lInspect -lMultipart -lHTTP1 -lReactor "$B/shim.o" -lcrypto -lz \
    -o fuzz/build/response-fuzz 2>&1 | grep -v "warning:" || true
test -x fuzz/build/response-fuzz
mkdir -p fuzz/corpus-response
# Seeds: well-formed responses of every framing, interim responses, and the malformed shapes an upstream can
# send (bad chunk sizes, conflicting lengths, folded or bare-LF headers, a body after a 204, bytes after the end).
python3 - fuzz/corpus-response <<'PY'
import sys
out = sys.argv[1]
responses = [
    b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2;ext=1\r\nok\r\n0\r\nTrailer: x\r\n\r\n",
    b"HTTP/1.1 403 Forbidden\r\nConnection: close\r\nContent-Length: 1\r\n\r\nn",
    b"HTTP/1.0 200 OK\r\n\r\nclose-delimited",
    b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n",
    b"HTTP/1.1 304 Not Modified\r\nETag: \"x\"\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort",
    b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokEXTRA",
    b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nok",
    b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nfffffffffffffffff\r\nok\r\n0\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nokX\r\n0\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nX: a\r\n folded\r\nContent-Length: 0\r\n\r\n",
    b"HTTP/1.1 200 OK\nContent-Length: 2\n\nok",
    b"HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\nhello",
    b"HTTP/1.1 200 OK\r\nSet-Cookie: a=b\r\nSet-Cookie: c=d\r\nContent-Length: 18446744073709551615\r\n\r\nx",
    b"HTTP/1.1 999 Odd\r\nContent-Length: 0\r\n\r\n",
    b"HTTP/2 200\r\n\r\n",
    b"not http at all\r\n\r\n",
    b"HTTP/1.1 200 OK\r\n" + b"X-Long: " + b"a" * 3000 + b"\r\nContent-Length: 0\r\n\r\n",
]
n = 0
for response in responses:
    for selector in (0x00, 0x01, 0x02, 0x04, 0x08, 0x13, 0x43, 0x86):
        for piece in (0, 1, 7):
            with open(f"{out}/seed-{n:03d}", "wb") as f:
                f.write(bytes([selector, piece]) + response)
            n += 1
PY
cd fuzz/build
run_fuzzer response-fuzz "$RESPONSE_SECONDS" 4096 20 corpus-response "upstream response path"
