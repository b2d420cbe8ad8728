#!/usr/bin/env python3
"""Differential test: Formwall's multipart parser against python-multipart (an independent implementation).

Generates N random multipart bodies (seeded, reproducible), parses each with python-multipart fed in random
chunks, and with `formwall inspect --batch` (which also feeds random chunks), then compares, for every body
both accept: the number of parts and each part's name, filename, content type, size and SHA-256.

Bodies mix what browsers and other real clients send (quoted and unquoted parameters, %22-escaped quotes,
UTF-8, odd header case, trailing whitespace, no final CRLF) with delimiter look-alikes inside data, sizes up to
a few MiB, and a share of hostile mutations (bare LF, preamble, epilogue, missing close delimiter, folding,
padding after delimiters, truncated bodies).

Every disagreement must belong to one of KNOWN_DIFFERENCES below, each explained; anything else fails.
Exit status 0 on success, 1 on an unexplained disagreement, 2 on a harness error.
"""
import argparse
import hashlib
import json
import logging
import os
import random
import subprocess
import sys
import tempfile

from python_multipart.multipart import MultipartParser, parse_options_header

# Where the two parsers are known to disagree, and why Formwall's choice is deliberate.
KNOWN_DIFFERENCES = {
    "oracle-accepts-truncated": "python-multipart's finalize() does not require the close delimiter; "
                                "Formwall rejects a body that never completes (truncated).",
    "oracle-accepts-bad-lf": "python-multipart treats a bare LF before the delimiter as data and keeps "
                             "looking; Formwall recognises the LF delimiter (flagged lf-line, rejected by "
                             "the default policy).",
    "formwall-accepts-lf": "Formwall tolerates bare-LF line ends (flagged lf-line, rejected by the default "
                           "policy unless a route allows it); python-multipart fails on them.",
    "ie-path": "python-multipart strips everything up to the last backslash from filenames that look like "
               "Windows paths; Formwall reports the filename as sent and leaves sanitising to policy.",
    "folding": "Formwall unfolds obs-fold part headers (flagged header-folding, rejected by default); "
               "python-multipart fails or reads a folded line as a new header.",
    "padding": "Formwall accepts RFC 2046 transport padding (spaces/tabs) after a delimiter; "
               "python-multipart rejects it.",
    "preamble": "python-multipart refuses any preamble other than blank lines; Formwall skips it as RFC 2046 "
                "allows, flagged data-before (the default policy logs it; the preamble never reaches the upstream).",
    "partial-final-crlf": "After the close delimiter Formwall accepts a partial final CRLF (a lone CR); "
                          "python-multipart rejects it.",
    "lookalike": "A line '--boundary-X' (the boundary followed by anything but '--' or padding+CRLF) is data "
                 "under RFC 2046; Formwall keeps it as data, flagged delimiter-lookalike, while python-multipart "
                 "fails the whole body.",
    "preamble-delimiter": "A preamble that itself starts with '--' is refused by Formwall "
                          "(missing_initial_delimiter) but skipped by python-multipart.",
}

BCHARS = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz'()+_,-./:=?"
NAME_CHARS = list("abcXYZ019_-. ;=,'") + ["é", "€", "✓", "日本", "%22", "%0D%0A"]


def rand_boundary(rng):
    n = rng.choice([1, 5, 16, 27, 40, 70])
    s = "".join(rng.choice(BCHARS) for _ in range(n))
    return s


def rand_name(rng, allow_empty=False):
    n = rng.randint(0 if allow_empty else 1, 10)
    return "".join(rng.choice(NAME_CHARS) for _ in range(n))


def rand_data(rng, boundary, big):
    b = boundary.encode()
    pieces = [b"\r\n", b"\r", b"\n", b"--", b"\r\n--", b"\r\n--" + b[:-1], b"--" + b, b"\r\n-" + b,
              b"\r\n--" + b + b"X", b"\r\n--" + b + b"-X", b"\r\n--" + b[: len(b) // 2], b"\x00\xff"]
    if big:
        size = rng.randint(256 * 1024, 3 * 1024 * 1024)
        out = bytearray(os.urandom(size) if rng.random() < 0.5 else rng.randbytes(size))
        for _ in range(rng.randint(0, 50)):
            p = rng.choice(pieces)
            at = rng.randint(0, len(out))
            out[at:at] = p
        return bytes(out)
    out = bytearray()
    for _ in range(rng.randint(0, 12)):
        if rng.random() < 0.5:
            out += rng.choice(pieces)
        else:
            out += rng.randbytes(rng.randint(0, 300))
    return bytes(out)


def make_body(rng):
    boundary = rand_boundary(rng)
    quoted_ct = rng.random() < 0.3
    content_type = "multipart/form-data; boundary=" + (f'"{boundary}"' if quoted_ct else boundary)
    mutation = rng.choices(
        ["none", "lf", "preamble", "epilogue", "truncate", "nofinalcrlf", "padding", "fold", "cut"],
        weights=[70, 4, 4, 4, 4, 5, 3, 3, 3])[0]
    nl = b"\n" if mutation == "lf" else b"\r\n"
    body = bytearray()
    if mutation == "preamble":
        body += rng.choice([b"preamble text\r\n", b"\r\n", b"--not-it\r\n", b"x"])
    nparts = rng.randint(0, 6)
    for i in range(nparts):
        name = rand_name(rng)
        is_file = rng.random() < 0.5
        filename = rand_name(rng, allow_empty=True) if is_file else None
        pad = b" \t" if mutation == "padding" and rng.random() < 0.5 else b""
        body += (b"" if i == 0 and mutation != "preamble" else nl) + b"--" + boundary.encode() + pad + nl
        cd_name = rng.choice(["Content-Disposition", "content-disposition", "CONTENT-DISPOSITION"])
        plain = all(c.isalnum() or c in "_-." for c in name) and (filename is None or
                                                                 all(c.isalnum() or c in "_-." for c in filename))
        if plain and filename and rng.random() < 0.3:
            cd = f"form-data; name={name}; filename={filename}"   # iOS-style unquoted
        else:
            cd = f'form-data; name="{name}"' + (f'; filename="{filename}"' if filename is not None else "")
        if rng.random() < 0.2:
            cd += " "   # trailing whitespace after the value
        if mutation == "fold" and rng.random() < 0.5:
            cd = cd.replace("; ", ";" + nl.decode() + " ", 1)
        body += f"{cd_name}: {cd}".encode() + nl
        if is_file or rng.random() < 0.2:
            ct = rng.choice(["text/plain", "image/png", "application/octet-stream", "image/jpg ",
                             "application/json; charset=utf-8", "Text/HTML"])
            body += b"Content-Type: " + ct.encode() + nl
        body += nl
        body += rand_data(rng, boundary, big=rng.random() < 0.01)
    body += nl + b"--" + boundary.encode() + b"--"
    if nparts == 0:
        body = body[len(nl):] if mutation != "preamble" else body
    if mutation == "truncate":
        body = body[: rng.randint(0, len(body))]
    elif mutation == "epilogue":
        body += b"\r\nepilogue"
    elif mutation == "cut":
        body = body[: len(body) - rng.randint(1, 5)]
    elif mutation != "nofinalcrlf":
        body += nl
    return content_type, boundary, bytes(body), mutation


def oracle(body, boundary, rng):
    parts = []
    state = {"cur": None, "field": b"", "value": b"", "ended": False}

    def on_part_begin():
        state["cur"] = {"headers": [], "sha": hashlib.sha256(), "size": 0}

    def on_header_field(data, start, end):
        state["field"] += data[start:end]

    def on_header_value(data, start, end):
        state["value"] += data[start:end]

    def on_header_end():
        state["cur"]["headers"].append((state["field"], state["value"]))
        state["field"] = b""
        state["value"] = b""

    def on_part_data(data, start, end):
        state["cur"]["sha"].update(data[start:end])
        state["cur"]["size"] += end - start

    def on_part_end():
        parts.append(state["cur"])

    def on_end():
        state["ended"] = True

    p = MultipartParser(boundary.encode(), {
        "on_part_begin": on_part_begin, "on_header_field": on_header_field, "on_header_value": on_header_value,
        "on_header_end": on_header_end, "on_part_data": on_part_data, "on_part_end": on_part_end,
        "on_end": on_end})
    try:
        i = 0
        while i < len(body):
            n = rng.choice([1, 2, 7, 100, 4096, 65536, len(body)])
            p.write(body[i:i + n])
            i += n
        p.finalize()
    except Exception as e:  # python-multipart raises MultipartParseError and friends
        return {"ok": False, "error": type(e).__name__}
    out = []
    for part in parts:
        headers = {}
        for k, v in part["headers"]:
            headers.setdefault(k.lower(), v)
        cd = headers.get(b"content-disposition")
        name = filename = None
        if cd is not None:
            _, params = parse_options_header(cd)
            name = params.get(b"name")
            filename = params.get(b"filename")
        ct = headers.get(b"content-type")
        out.append({
            "name": name.decode("utf-8", "replace") if name is not None else None,
            "filename": filename.decode("utf-8", "replace") if filename is not None else None,
            "content_type": ct.decode("utf-8", "replace").strip() if ct is not None else None,
            "size": part["size"], "sha256": part["sha"].hexdigest()})
    return {"ok": state["ended"], "parts": out}


def classify(mutation, ours, theirs, body):
    """Returns the KNOWN_DIFFERENCES key explaining a disagreement, or None."""
    if theirs["ok"] and ours["error"] in ("truncated",) and mutation in ("truncate", "cut"):
        return "oracle-accepts-truncated"
    if theirs["ok"] and ours["error"] == "missing_initial_delimiter" and mutation in ("preamble", "truncate", "cut"):
        return "preamble-delimiter"
    if mutation == "preamble" and ours["error"] is None and not theirs["ok"] and "data-before" in ours["anomalies"]:
        return "preamble"
    if mutation in ("truncate", "cut") and ours["error"] is None and not theirs["ok"] and body.endswith(b"--\r"):
        return "partial-final-crlf"
    if ours["error"] is None and not theirs["ok"] and "delimiter-lookalike" in ours["anomalies"] \
            and mutation in ("none", "nofinalcrlf", "epilogue"):
        return "lookalike"
    if mutation == "lf":
        return "formwall-accepts-lf" if not theirs["ok"] else "oracle-accepts-bad-lf"
    if mutation == "fold":
        return "folding"
    if mutation == "padding":
        return "padding"
    if theirs["ok"] and ours["error"] is None and len(ours["parts"]) == len(theirs["parts"]):
        for a, b in zip(ours["parts"], theirs["parts"]):
            if a["filename"] != b["filename"] and a["filename"] and "\\" in a["filename"]:
                return "ie-path"
    return None


def comparable(parts):
    return [{k: p[k] for k in ("name", "filename", "content_type", "size", "sha256")} for p in parts]


def main():
    logging.getLogger("python_multipart").setLevel(logging.CRITICAL)
    logging.getLogger("multipart").setLevel(logging.CRITICAL)
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--count", type=int, default=10000)
    ap.add_argument("--seed", type=int, default=20261129)
    ap.add_argument("--formwall", required=True)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    cases = [make_body(rng) for _ in range(args.count)]
    with tempfile.NamedTemporaryFile(prefix="formwall-diff-", delete=False) as f:
        for ct, _, body, _ in cases:
            f.write(ct.encode() + b"\n" + str(len(body)).encode() + b"\n" + body)
        batch = f.name
    try:
        proc = subprocess.run([args.formwall, "inspect", "--batch", batch, "--seed", str(args.seed)],
                              capture_output=True, timeout=1200)
    finally:
        os.unlink(batch)
    if proc.returncode != 0:
        print("formwall inspect --batch failed:", proc.stderr.decode(errors="replace"), file=sys.stderr)
        return 2
    results = [json.loads(line) for line in proc.stdout.decode().splitlines()]
    if len(results) != len(cases):
        print(f"expected {len(cases)} results, got {len(results)}", file=sys.stderr)
        return 2
    stats = {"both_accept": 0, "both_reject": 0, "agree_parts": 0, "explained": {}, "unexplained": 0,
             "bytes": sum(len(c[2]) for c in cases)}
    failures = []
    for idx, ((ct, boundary, body, mutation), ours) in enumerate(zip(cases, results)):
        theirs = oracle(body, boundary, rng)
        ours_ok = ours["error"] is None
        if ours_ok and theirs["ok"]:
            stats["both_accept"] += 1
            if comparable(ours["parts"]) == theirs["parts"]:
                stats["agree_parts"] += 1
                continue
        elif not ours_ok and not theirs["ok"]:
            stats["both_reject"] += 1
            continue
        why = classify(mutation, ours, theirs, body)
        if why:
            stats["explained"][why] = stats["explained"].get(why, 0) + 1
            continue
        stats["unexplained"] += 1
        if len(failures) < int(os.environ.get("DIFF_SHOW", "5")):
            failures.append({"index": idx, "mutation": mutation, "content_type": ct, "body_head": body[:400].decode("latin-1"),
                             "formwall": ours, "python_multipart": theirs})
    print(json.dumps(stats, indent=1))
    for f in failures:
        ours, theirs = f["formwall"], f["python_multipart"]
        print(f"--- disagreement at body {f['index']} (mutation {f['mutation']}): {f['content_type']}")
        print("  formwall:", json.dumps({k: ours[k] for k in ("error", "error_offset", "anomalies")}))
        print("  python-multipart ok:", theirs["ok"], theirs.get("error", ""))
        mine, oracle_parts = comparable(ours["parts"]), theirs.get("parts", [])
        print(f"  parts: formwall {len(mine)}, python-multipart {len(oracle_parts)}")
        for a, b in zip(mine, oracle_parts):
            if a != b:
                print("  first differing part:\n    formwall:", json.dumps(a), "\n    oracle:  ", json.dumps(b))
                break
        print("  body head:", repr(f["body_head"][:300]))
    print(f"{stats['agree_parts'] + stats['both_reject'] + sum(stats['explained'].values())} passed, "
          f"{stats['unexplained']} failed")
    return 1 if stats["unexplained"] else 0


if __name__ == "__main__":
    sys.exit(main())
