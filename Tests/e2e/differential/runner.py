"""The differential suite's engine: sends every variant through one Formwall per backend, asks
`formwall inspect` what Formwall forwards, and compares what each framework read.

Used by Tests/e2e/test_differential_frameworks.py. Verdicts per variant:

* `rejected`: every Formwall answered with its own JSON error (4xx/5xx with `error`, `status`, `request_id`)
  and no backend logged the request id (checked once every request has been answered);
* `agreed`: every backend answered 200 and its `parts` equal the parts `formwall inspect --rules` forwards,
  and the `form` views agree, apart from names the policy lets repeat (listed under `repeat_allowed`);
* `disagreed`: anything else, with the reasons.

Comparison rules (documented in docs/differential.md): parts are compared as lists sorted by (kind, name)
with the order of equal names kept (werkzeug, PHP, Django and Go do not keep the order between different
names); a file's Content-Type is compared as its lower-cased media type (busboy and Django drop the
parameters); fields carry no Content-Type. PHP's auto-indexed `a[0]`, `a[1]` are read back as `a[]` when the
forwarded body has `a[]`; every other PHP rewrite (`a.b` to `a_b`, nesting) is compared as it is.
"""

from __future__ import annotations

import base64
import json
import re
import subprocess
import tempfile
import urllib.parse
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from e2e_helpers import RawConn, formwall_binary

HERE = Path(__file__).resolve().parent
POLICY = HERE / "policy.rules"
OUT = HERE / "out"
REQUEST_TIMEOUT = 20.0


def repeat_allowed_names(policy: Path = POLICY) -> set[str]:
    """Names of rules with an explicit `repeat` in the policy (their `form` views are not compared)."""
    text = policy.read_text()
    return {m.group(2) or m.group(3) for m in
            re.finditer(r'\b(field|file)\s+(?:"([^"]+)"|([^\s{;]+))\s*\{[^}]*\brepeat\b', text)}


# ---------------------------------------------------------------------------------------------- the oracle

def _media_type(value):
    return None if value is None else value.split(";")[0].strip().lower()


def _canonical_multipart(body: bytes, boundary: str) -> list[dict]:
    """Parts of Formwall's canonical encoding (docs/multipart.md): headers and data of each part."""
    delim = b"\r\n--" + boundary.encode()
    pieces = (b"\r\n" + body).split(delim)
    assert pieces[0] == b"" and pieces[-1] in (b"--\r\n", b"--"), "not a canonical body"
    out = []
    for piece in pieces[1:-1]:
        head, _, data = piece[2:].partition(b"\r\n\r\n")
        headers = {}
        for line in head.split(b"\r\n"):
            k, _, v = line.partition(b":")
            headers[k.strip().lower().decode()] = v.strip().decode("utf-8", "surrogateescape")
        out.append({"headers": headers, "data": data})
    return out


def inspect(variant, workdir: Path, policy: Path = POLICY) -> dict:
    """What `formwall inspect --rules` decides for the variant and, if it forwards, the parts it forwards."""
    src = workdir / f"{variant.id}.body"
    reenc = workdir / f"{variant.id}.out"
    decoded = variant.decoded_body()
    if decoded is None:
        return {"status": None, "error": "the suite cannot decode this Content-Encoding", "parts": None}
    src.write_bytes(decoded)
    path = variant.path  # the whole target: its query names matter (query-collision)
    done = subprocess.run([str(formwall_binary()), "inspect", "--content-type", variant.content_type,
                           "--rules", str(policy), "--path", path, "--reencode", str(reenc), str(src)],
                          capture_output=True, timeout=30)
    try:
        doc = json.loads(done.stdout)
    except ValueError:
        return {"status": None, "error": f"inspect exit {done.returncode}: {done.stderr[-300:]!r}", "parts": None}
    result = {"status": doc.get("status"), "decision": doc.get("decision"), "error": doc.get("error"),
              "violations": [v["kind"] for v in doc.get("violations", [])], "parts": None}
    if doc.get("status") != 200 or not reenc.exists():
        return result
    forwarded = [p for p in doc.get("parts", []) if p.get("action") == "forward"]
    data = reenc.read_bytes()
    parts = []
    if doc.get("body") == "urlencoded":
        pairs = [pair.split(b"=", 1) for pair in data.split(b"&")] if data else []
        assert len(pairs) == len(forwarded), (pairs, forwarded)
        for p, (_, v) in zip(forwarded, pairs):
            value = urllib.parse.unquote_to_bytes(v.replace(b"+", b" "))
            parts.append(_part(p["name"], None, None, value))
    elif doc.get("body") == "opaque":
        result["opaque"] = True
    else:
        canon = _canonical_multipart(data, doc["boundary"])
        assert len(canon) == len(forwarded), (canon, forwarded)
        for p, c in zip(forwarded, canon):
            entry = {"name": p["name"], "filename": p["filename"], "size": p["size"], "sha256": p["sha256"],
                     "kind": "file" if p["filename"] is not None else "field",
                     "content_type": _media_type(c["headers"].get("content-type")) if p["filename"] is not None
                     else None}
            parts.append(entry)
    result["parts"] = parts
    return result


def _part(name, filename, ctype, data: bytes) -> dict:
    import hashlib
    return {"name": name, "filename": filename, "content_type": ctype, "size": len(data),
            "sha256": hashlib.sha256(data).hexdigest(), "kind": "file" if filename is not None else "field"}


# ---------------------------------------------------------------------------------------------- sending

def send(port: int, variant, request_id: str) -> dict:
    head = [f"POST {variant.path} HTTP/1.1", f"Host: 127.0.0.1:{port}", f"Content-Type: {variant.content_type}",
            f"Content-Length: {len(variant.body)}", f"X-Request-Id: {request_id}", "Connection: close"]
    head += [f"{k}: {v}" for k, v in variant.headers]
    try:
        with RawConn(port, timeout=REQUEST_TIMEOUT) as conn:
            conn.send(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + variant.body)
            resp = conn.read_response("POST", timeout=REQUEST_TIMEOUT)
    except Exception as e:  # a connection error is a result to report, not a crash of the run
        return {"status": None, "error": f"{type(e).__name__}: {e}"}
    try:
        doc = json.loads(resp.body)
    except ValueError:
        doc = None
    return {"status": resp.status, "json": doc, "text": None if doc is not None else resp.body[:300].decode("latin-1")}


def is_formwall_error(resp: dict) -> bool:
    doc = resp.get("json")
    return (resp.get("status") or 0) >= 400 and isinstance(doc, dict) and {"error", "status", "request_id"} <= doc.keys()


# ---------------------------------------------------------------------------------------------- comparing

_INDEXED = re.compile(r"^(.*)\[(\d+)\]$")


def php_names(names: list[str], expected_names: set[str]) -> list[str]:
    """PHP's auto-index back to `a[]` where the forwarded body had `a[]`."""
    out = []
    for n in names:
        m = _INDEXED.match(n) if n is not None else None
        out.append(f"{m.group(1)}[]" if n is not None and m and f"{m.group(1)}[]" in expected_names and n not in expected_names else n)
    return out


def normal_parts(parts: list[dict], backend: str, expected_names: set[str]) -> list[dict]:
    keys = ("name", "filename", "content_type", "size", "sha256", "kind", "error")
    out = []
    for p in parts:
        q = {k: p[k] for k in keys if k in p}
        q.setdefault("name", None)  # node leaves an undefined name out of its JSON
        q.setdefault("kind", "field")
        q["content_type"] = _media_type(q.get("content_type")) if q.get("kind") == "file" else None
        out.append(q)
    if backend == "php":
        for q, n in zip(out, php_names([q["name"] for q in out], expected_names)):
            q["name"] = n
    return sorted(out, key=lambda q: (q["kind"], str(q["name"])))


def normal_form(form: dict, backend: str, expected_names: set[str]) -> dict:
    if backend != "php":
        return form
    out = {}
    for k, n in zip(form, php_names(list(form), expected_names)):
        out.setdefault(n, form[k])
    return out


def _short(p: dict) -> str:
    s = f"{p['kind']} {p['name']!r}"
    if p.get("filename") is not None:
        s += f" fn={p['filename']!r}"
    if p.get("content_type"):
        s += f" ct={p['content_type']}"
    s += f" {p['size']}B {p['sha256'][:8]}"
    if "error" in p:
        s += f" error={p['error']}"
    return s


def part_diff(expected: list[dict], got: list[dict]) -> str:
    exp = Counter(_short(p) for p in expected)
    have = Counter(_short(p) for p in got)
    missing = list((exp - have).elements())
    extra = list((have - exp).elements())
    bits = []
    if missing:
        bits.append("missing " + "; ".join(missing))
    if extra:
        bits.append("read " + "; ".join(extra))
    return " | ".join(bits) or "order differs"


def judge(variant, insp: dict, responses: dict, logged: dict, repeat_names: set[str]) -> dict:
    """The verdict for one variant from its inspect result and every backend's response."""
    reasons = []
    rejected = {b: is_formwall_error(r) for b, r in responses.items()}
    result = {"verdict": None, "reasons": reasons, "backends": {}, "repeat_allowed": {}}
    if all(rejected.values()):
        seen = [b for b in responses if logged[b]]
        statuses = sorted({r["status"] for r in responses.values()})
        errors = sorted({r["json"]["error"] for r in responses.values()})
        result.update(status=statuses, error=errors)
        if seen:
            reasons.append(f"rejected, yet logged by {', '.join(seen)}")
        if insp.get("status") == 200:
            reasons.append(f"serve rejected ({errors}) but inspect allows")
        result["verdict"] = "disagreed" if reasons else "rejected"
        for b in responses:
            result["backends"][b] = {"outcome": "rejected"}
        return result
    if any(rejected.values()):
        reasons.append("Formwalls disagree: rejected by " + ", ".join(b for b, r in rejected.items() if r))
    expected = insp.get("parts")
    if insp.get("status") != 200:
        reasons.append(f"forwarded, but inspect says {insp.get('status')} {insp.get('error')}")
    expected_names = {p["name"] for p in expected or []}
    exp_sorted = sorted(expected or [], key=lambda q: (q["kind"], str(q["name"])))
    forms = {}
    for b, r in responses.items():
        entry = {"status": r.get("status")}
        result["backends"][b] = entry
        if rejected[b]:
            entry["outcome"] = "rejected"
            continue
        doc = r.get("json")
        if r.get("status") != 200 or not isinstance(doc, dict) or "parts" not in doc:
            entry["outcome"] = "error"
            entry["detail"] = (doc or {}).get("error") if isinstance(doc, dict) else r.get("text") or r.get("error")
            reasons.append(f"{b}: HTTP {r.get('status')} {str(entry['detail'])[:120]}")
            continue
        parts = normal_parts(doc["parts"], b, expected_names)
        form = normal_form(doc["form"], b, expected_names)
        entry["parts"] = parts
        entry["form"] = form
        if expected is not None and parts != exp_sorted:
            entry["outcome"] = "parts-differ"
            entry["diff"] = part_diff(exp_sorted, parts)
            reasons.append(f"{b}: {entry['diff']}")
        else:
            entry["outcome"] = "agreed"
        forms[b] = {k: v for k, v in form.items() if k not in repeat_names}
        for k in repeat_names & form.keys():
            result["repeat_allowed"].setdefault(k, {})[b] = form[k]
    groups: dict[str, list[str]] = {}
    for b, f in forms.items():
        groups.setdefault(json.dumps(f, sort_keys=True), []).append(b)
    if len(groups) > 1:
        ordered = sorted(groups.items(), key=lambda kv: -len(kv[1]))
        majority = json.loads(ordered[0][0])
        for text, names in ordered[1:]:
            f = json.loads(text)
            diffs = []
            for k in sorted(set(f) | set(majority)):
                if f.get(k) != majority.get(k):
                    diffs.append(f"{k!r}: {_fv(f.get(k))} vs {_fv(majority.get(k))}")
            reasons.append(f"form view of {','.join(names)} differs from {','.join(ordered[0][1])}: "
                           + "; ".join(diffs[:4]))
            for n in names:
                if result["backends"][n]["outcome"] == "agreed":
                    result["backends"][n]["outcome"] = "form-differs"
    result["verdict"] = "disagreed" if reasons else "agreed"
    return result


def _fv(v) -> str:
    if v is None:
        return "absent"
    s = f"{v['size']}B {v['sha256'][:8]}"
    if "filename" in v:
        s += f" fn={v['filename']!r}"
    return s


# ---------------------------------------------------------------------------------------------- the run

def run(variants, proxies: dict, backends: dict, workdir: Path, workers: int = 16) -> list[dict]:
    """Sends every variant to every proxy (name -> port), inspects each, and judges; returns the records."""
    insp_dir = Path(tempfile.mkdtemp(dir=workdir, prefix="inspect-"))
    ids = {(v.id, b): f"dv-{i}-{b}" for i, v in enumerate(variants) for b in proxies}
    with ThreadPoolExecutor(max_workers=workers) as pool:
        insp_f = {v.id: pool.submit(inspect, v, insp_dir) for v in variants}
        resp_f = {(v.id, b): pool.submit(send, port, v, ids[(v.id, b)]) for v in variants
                  for b, port in proxies.items()}
        inspected = {k: f.result() for k, f in insp_f.items()}
        responses = {k: f.result() for k, f in resp_f.items()}
    logged_ids = {b: be.logged_ids() for b, be in backends.items()}
    repeat_names = repeat_allowed_names()
    records = []
    for v in variants:
        resp = {b: responses[(v.id, b)] for b in proxies}
        logged = {b: ids[(v.id, b)] in logged_ids[b] for b in proxies}
        verdict = judge(v, inspected[v.id], resp, logged, repeat_names)
        records.append({"id": v.id, "class": v.cls, "note": v.note, "control": v.control,
                        "content_type": v.content_type, "headers": v.headers, "path": v.path,
                        "body_b64": base64.b64encode(v.body).decode(), "body_preview": repr(v.body[:400]),
                        "inspect": inspected[v.id], **verdict})
    return records


# ---------------------------------------------------------------------------------------------- probes

PROBES = [
    ("duplicate field", "multipart", [("role", "user"), ("role", "admin")]),
    ("duplicate file", "multipart-files", [("doc", "one"), ("doc", "two")]),
    ("duplicate urlencoded", "urlencoded", [("role", "user"), ("role", "admin")]),
    ("a.b", "multipart", [("a.b", "1")]),
    ("a b", "multipart", [("a b", "1")]),
    (" a (leading space)", "multipart", [(" a", "1")]),
    ("a[b]", "multipart", [("a[b]", "1")]),
    ("a[] twice", "multipart", [("a[]", "1"), ("a[]", "2")]),
    ("a[b (unbalanced)", "multipart", [("a[b", "1")]),
    ("a.b[c.d]", "multipart", [("a.b[c.d]", "1")]),
    ("a then a[]", "multipart", [("a", "1"), ("a[]", "2")]),
    ("a[] then a", "multipart", [("a[]", "1"), ("a", "2")]),
]


def probe_body(kind: str, items) -> tuple[str, bytes]:
    if kind == "urlencoded":
        return "application/x-www-form-urlencoded", urllib.parse.urlencode(items).encode()
    out = bytearray()
    for name, value in items:
        out += b"--PrB\r\nContent-Disposition: form-data; name=\"" + name.encode() + b'"'
        if kind == "multipart-files":
            out += b'; filename="' + value.encode() + b'.txt"\r\nContent-Type: text/plain'
        out += b"\r\n\r\n" + value.encode() + b"\r\n"
    out += b"--PrB--\r\n"
    return "multipart/form-data; boundary=PrB", bytes(out)


def probes(backends: dict) -> list[dict]:
    """Sends each probe straight to each backend (no Formwall) and records what `form` and `parts` read."""
    from mutations import Variant

    out = []
    for label, kind, items in PROBES:
        ctype, body = probe_body(kind, items)
        v = Variant(f"probe-{label}", "probe", ctype, body, label)
        values = {}
        for value in {val for _, val in items}:
            import hashlib
            values[hashlib.sha256(value.encode()).hexdigest()] = value
        row = {"probe": label, "sent": items, "read": {}}
        for b, be in backends.items():
            r = send(be.port, v, f"probe-{b}")
            doc = r.get("json") if isinstance(r.get("json"), dict) else {}
            form = {k: values.get(x.get("sha256"), "?") for k, x in (doc.get("form") or {}).items()}
            names = [p["name"] for p in doc.get("parts") or []]
            row["read"][b] = {"form": form, "part_names": names, "status": r.get("status")}
        out.append(row)
    return out
