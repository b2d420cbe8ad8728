"""TLS on both sides, end to end: the real `formwall serve`, certificates made by the `openssl` CLI in the test
(tls_certs.py), clients curl, Python `ssl`/requests and `openssl s_client`, and the werkzeug upstream serving HTTPS
with Python `ssl` (upstream_app.py --tls-cert).

Every success and failure path of docs/tls.md: protocols, SNI, ALPN, plain HTTP on a TLS port, client
certificates, reload, upstream verification (CA, wrong host, expired, verification off, mTLS), pooling, the memory
bound over TLS, and slow or abandoned handshakes.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import time
from pathlib import Path

import pytest
import requests

from e2e_helpers import HOST, IO_TIMEOUT, events_with, free_port, json_lines, wait_until
from tls_certs import make_certs


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return make_certs(tmp_path_factory.mktemp("tls"))


def tls_args(certs, *extra: str) -> list[str]:
    return ["--tls-certificate", str(certs.server.cert), "--tls-key", str(certs.server.key), *extra]


def https(fw, path: str = "/x") -> str:
    return f"https://localhost:{fw.port}{path}"


def audit_records(path: Path) -> list[dict]:
    return json_lines(path)


def wait_audit(path: Path, count: int) -> list[dict]:
    return wait_until(lambda: (lambda r: r if len(r) >= count else None)(audit_records(path)), IO_TIMEOUT,
                      what=f"{count} audit records")


def handshake(port: int, *, server_name: str | None = "localhost", cafile=None, version=None, cert=None,
              alpn=("http/1.1",)) -> ssl.SSLSocket:
    """A Python `ssl` client handshake; returns the connected socket (the caller closes it) or raises."""
    context = ssl.create_default_context(cafile=str(cafile) if cafile else None)
    if cafile is None:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if version:
        context.minimum_version = context.maximum_version = version
    if cert:
        context.load_cert_chain(str(cert.cert), str(cert.key))
    if alpn:
        context.set_alpn_protocols(list(alpn))
    raw = socket.create_connection((HOST, port), timeout=IO_TIMEOUT)
    try:
        return context.wrap_socket(raw, server_hostname=server_name)
    except BaseException:
        raw.close()
        raise


def peer_cn(sock: ssl.SSLSocket) -> str:
    der = sock.getpeercert(binary_form=True)
    out = subprocess.run(["openssl", "x509", "-inform", "DER", "-noout", "-subject", "-nameopt", "RFC2253"],
                         input=der, capture_output=True, timeout=IO_TIMEOUT, check=True).stdout.decode()
    return out.strip().removeprefix("subject=").split(",")[0].removeprefix("CN=")


# ---------------------------------------------------------------------------------------------------------------
# The listener


def test_curl_over_tls13_reaches_the_upstream_as_https(certs, upstream, formwall_factory, tmp_path):
    audit = tmp_path / "audit.log"
    fw = formwall_factory(upstream.url, *tls_args(certs), "--audit-log", str(audit))
    out = subprocess.run(["curl", "-sS", "--cacert", str(certs.ca.cert), "-F", "caption=hi", "-F", "doc=@-;filename=a.txt",
                          "-w", "\n%{http_code} %{ssl_verify_result}", https(fw, "/upload")],
                         input=b"hello", capture_output=True, timeout=IO_TIMEOUT)
    body, _, status = out.stdout.decode().rpartition("\n")
    assert status == "200 0", out
    seen = json.loads(body)
    assert seen["headers"]["x-forwarded-proto"] == "https"
    assert seen["fields"] == {"caption": ["hi"]}
    [rec] = wait_audit(audit, 1)
    assert rec["tls"]["version"] == "TLSv1.3" and rec["tls"]["sni"] == "localhost", rec
    assert rec["tls"]["client_subject"] is None and rec["tls"]["cipher"].startswith("TLS_")


@pytest.mark.parametrize("flag,version", [("-tls1_3", "TLSv1.3"), ("-tls1_2", "TLSv1.2")])
def test_openssl_s_client_interop(certs, upstream, formwall_factory, flag, version):
    fw = formwall_factory(upstream.url, *tls_args(certs, "--tls-min-version", "1.2"))
    request = f"GET /s HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n".encode()
    out = subprocess.run(["openssl", "s_client", flag, "-connect", f"{HOST}:{fw.port}", "-servername", "localhost",
                          "-CAfile", str(certs.ca.cert), "-alpn", "http/1.1", "-verify_return_error", "-ign_eof"],
                         input=request, capture_output=True, timeout=IO_TIMEOUT)
    text = out.stdout.decode(errors="replace")
    assert f"Protocol  : {version}" in text or f"New, {version}" in text, text[-3000:]
    assert "ALPN protocol: http/1.1" in text, text[-3000:]
    assert "Verify return code: 0 (ok)" in text
    assert "HTTP/1.1 200 OK" in text


def test_tls12_is_refused_by_default_and_counted(certs, upstream, formwall_factory):
    admin = free_port()
    fw = formwall_factory(upstream.url, *tls_args(certs), "--admin", f"{HOST}:{admin}")
    with pytest.raises(ssl.SSLError):
        handshake(fw.port, cafile=certs.ca.cert, version=ssl.TLSVersion.TLSv1_2).close()
    s = handshake(fw.port, cafile=certs.ca.cert)
    assert s.version() == "TLSv1.3" and s.selected_alpn_protocol() == "http/1.1"
    s.close()
    def failures():
        text = requests.get(f"http://{HOST}:{admin}/metrics", timeout=IO_TIMEOUT).text
        return [l for l in text.splitlines() if l.startswith("formwall_tls_handshake_failures_total")]
    assert wait_until(lambda: any(l.endswith(" 1") and "handshake_failed" in l for l in failures()), IO_TIMEOUT,
                      what="the refused handshake counted")
    logged = wait_until(lambda: events_with(fw.stderr_text(), "tls handshake failed"), IO_TIMEOUT,
                        what="the handshake failure log line")
    assert logged[0]["reason"] == "handshake_failed"


def test_no_shared_cipher_fails_cleanly(certs, upstream, formwall_factory):
    fw = formwall_factory(upstream.url, *tls_args(certs, "--tls-min-version", "1.2"))
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    context.maximum_version = ssl.TLSVersion.TLSv1_2
    context.set_ciphers("AES128-SHA")   # no forward secrecy: not in the server's list
    with socket.create_connection((HOST, fw.port), timeout=IO_TIMEOUT) as raw:
        with pytest.raises(ssl.SSLError):
            context.wrap_socket(raw, server_hostname="localhost")
    # Still serving.
    assert requests.get(https(fw), verify=str(certs.ca.cert), timeout=IO_TIMEOUT).status_code == 200


def test_sni_chooses_the_certificate(certs, upstream, formwall_factory):
    fw = formwall_factory(upstream.url, *tls_args(certs), "--tls-certificate", str(certs.other.cert),
                          "--tls-key", str(certs.other.key))
    for name, cn in (("localhost", "localhost"), ("a.test", "localhost"), ("b.test", "b.test"),
                     ("unknown.test", "localhost"), (None, "localhost")):
        s = handshake(fw.port, server_name=name)
        assert peer_cn(s) == cn, name
        s.close()
    # curl verifies b.test's certificate by name.
    out = subprocess.run(["curl", "-sS", "--cacert", str(certs.ca.cert), "--resolve", f"b.test:{fw.port}:{HOST}",
                          "-o", "/dev/null", "-w", "%{http_code}", f"https://b.test:{fw.port}/"],
                         capture_output=True, text=True, timeout=IO_TIMEOUT)
    assert out.stdout == "200", out


def test_strict_sni_refuses_unknown_names(certs, upstream, formwall_factory):
    fw = formwall_factory(upstream.url, *tls_args(certs, "--tls-strict-sni"))
    with pytest.raises(ssl.SSLError, match="UNRECOGNIZED_NAME|unrecognized name"):
        handshake(fw.port, server_name="unknown.test")
    handshake(fw.port, server_name="a.test").close()


def test_plain_http_to_the_tls_port_gets_400_in_clear_text(certs, upstream, formwall_factory):
    fw = formwall_factory(upstream.url, *tls_args(certs))
    r = requests.get(f"http://{HOST}:{fw.port}/x", timeout=IO_TIMEOUT)
    assert r.status_code == 400 and r.json() == {"error": "plain_http_to_tls_port", "status": 400}
    assert upstream.requests() == []
    # The worker logs after it answered: wait for the line rather than read stderr once.
    [line] = wait_until(lambda: events_with(fw.stderr_text(), "tls handshake failed"), IO_TIMEOUT,
                        what="the handshake failure log line")
    assert line["reason"] == "plain_http" and line["level"] == "warn"


def test_plain_and_tls_listeners_side_by_side(certs, upstream, formwall_factory):
    plain = free_port()
    tls_port = free_port()
    fw = formwall_factory(upstream.url, *tls_args(certs), "--listen", f"http://{HOST}:{plain}",
                          "--listen", f"https://{HOST}:{tls_port}", port=tls_port)
    assert requests.get(f"http://{HOST}:{plain}/p", timeout=IO_TIMEOUT).json()["headers"]["x-forwarded-proto"] == "http"
    r = requests.get(f"https://localhost:{tls_port}/t", verify=str(certs.ca.cert), timeout=IO_TIMEOUT)
    assert r.json()["headers"]["x-forwarded-proto"] == "https"


def test_client_certificates(certs, upstream, formwall_factory, tmp_path):
    audit = tmp_path / "audit.log"
    fw = formwall_factory(upstream.url, *tls_args(certs, "--tls-client-ca", str(certs.ca.cert)),
                          "--audit-log", str(audit))
    ca = str(certs.ca.cert)
    # Without a certificate: refused (TLS 1.3 reports it on the first read).
    with pytest.raises((requests.exceptions.SSLError, requests.exceptions.ConnectionError)):
        requests.get(https(fw), verify=ca, timeout=IO_TIMEOUT)
    # A certificate from another CA: refused.
    with pytest.raises((requests.exceptions.SSLError, requests.exceptions.ConnectionError)):
        requests.get(https(fw), verify=ca, cert=(str(certs.foreign_client.cert), str(certs.foreign_client.key)),
                     timeout=IO_TIMEOUT)
    # A good one: the verified subject goes upstream, replacing the client's own copy of the field.
    r = requests.get(https(fw), verify=ca, cert=(str(certs.client.cert), str(certs.client.key)),
                     headers={"X-Client-Cert-Subject": "CN=admin"}, timeout=IO_TIMEOUT)
    assert r.status_code == 200
    assert r.json()["headers"]["x-client-cert-subject"] == "CN=alice,O=Formwall Tests"
    rec = wait_audit(audit, 1)[-1]
    assert rec["tls"]["client_subject"] == "CN=alice,O=Formwall Tests", rec
    reasons = {e["reason"] for e in wait_until(lambda: events_with(fw.stderr_text(), "tls handshake failed"),
                                               IO_TIMEOUT, what="the handshake failure log lines")}
    assert reasons <= {"client_certificate", "closed", "handshake_failed", "protocol_error"} and reasons, reasons


def test_optional_client_certificate_and_forged_subject_on_a_plain_listener(certs, upstream, formwall_factory):
    plain, tls_port = free_port(), free_port()
    fw = formwall_factory(upstream.url, *tls_args(certs, "--tls-client-ca", str(certs.ca.cert),
                                                  "--tls-client-certificate", "optional"),
                          "--listen", f"http://{HOST}:{plain}", "--listen", f"https://{HOST}:{tls_port}", port=tls_port)
    r = requests.get(f"https://localhost:{tls_port}/", verify=str(certs.ca.cert), timeout=IO_TIMEOUT)
    assert r.status_code == 200 and "x-client-cert-subject" not in r.json()["headers"]
    forged = requests.get(f"http://{HOST}:{plain}/", headers={"X-Client-Cert-Subject": "CN=admin"}, timeout=IO_TIMEOUT)
    assert "x-client-cert-subject" not in forged.json()["headers"]


def test_sighup_reloads_certificates_and_keeps_them_when_the_new_files_are_bad(certs, upstream, formwall_factory,
                                                                              tmp_path):
    live = tmp_path / "live"
    live.mkdir(mode=0o700)
    shutil.copy(certs.server.cert, live / "cert.pem")
    shutil.copy(certs.server.key, live / "key.pem")
    fw = formwall_factory(upstream.url, "--tls-certificate", str(live / "cert.pem"), "--tls-key", str(live / "key.pem"))
    with handshake(fw.port, server_name="b.test") as s:
        assert peer_cn(s) == "localhost"
    # Open connection survives the reload.
    kept = handshake(fw.port, cafile=certs.ca.cert)
    shutil.copy(certs.other.cert, live / "cert.pem")
    shutil.copy(certs.other.key, live / "key.pem")
    fw.signal(signal.SIGHUP)
    fw.stopped_by_test = False

    def new_cn():
        with handshake(fw.port, server_name="b.test") as s:
            return peer_cn(s) == "b.test"
    wait_until(new_cn, IO_TIMEOUT, what="the reloaded certificate")
    kept.sendall(b"GET /k HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
    assert kept.recv(100).startswith(b"HTTP/1.1 200")
    kept.close()
    # A broken key: the reload fails, the current certificate stays.
    (live / "key.pem").write_text("not a key\n")
    fw.signal(signal.SIGHUP)
    fw.stopped_by_test = False
    wait_until(lambda: events_with(fw.stderr_text(), "certificates reload failed"), IO_TIMEOUT,
               what="the failed reload logged")
    with handshake(fw.port, server_name="b.test") as s:
        assert peer_cn(s) == "b.test"


def test_bad_certificate_files_stop_startup(certs, upstream, tmp_path):
    from e2e_helpers import formwall_binary
    bad = tmp_path / "bad.pem"
    bad.write_text("junk\n")
    for args, expect in (
        (["--tls-certificate", str(bad), "--tls-key", str(certs.server.key)], str(bad)),
        (["--tls-certificate", str(certs.server.cert), "--tls-key", str(certs.other.key)], "key"),
    ):
        proc = subprocess.run([str(formwall_binary()), "serve", "--listen", f"{HOST}:{free_port()}",
                               "--upstream", upstream.url, *args], capture_output=True, text=True, timeout=IO_TIMEOUT)
        assert proc.returncode == 1, proc
        [line] = events_with(proc.stderr, "cannot start")
        assert "TLS" in line["error"] and expect in line["error"], line


def test_garbage_and_abandoned_handshakes_are_bounded(certs, upstream, formwall_factory):
    fw = formwall_factory(upstream.url, *tls_args(certs), "--single-process", "--workers", "1",
                          "--client-header-timeout", "2")
    pid = fw.proc.pid

    def rss_kib() -> int:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        raise AssertionError("no VmRSS")

    # Garbage of every shape: the process keeps serving.
    rng = hashlib.sha256()
    for i in range(50):
        rng.update(bytes([i]))
        with socket.create_connection((HOST, fw.port), timeout=IO_TIMEOUT) as s:
            s.sendall(b"\x16\x03\x01" + rng.digest() * (i + 1))
    baseline = rss_kib()
    # 1,000 half-open handshakes: a partial ClientHello, then silence.
    held = []
    for _ in range(1000):
        s = socket.create_connection((HOST, fw.port), timeout=IO_TIMEOUT)
        s.sendall(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03")
        held.append(s)
    peak = rss_kib()
    growth = peak - baseline
    print(f"1000 half-open TLS handshakes: RSS {baseline} KiB -> {peak} KiB (+{growth / 1000:.1f} KiB each)")
    # A fixed cost per connection (buffers, the SSL object and its record buffer; measured 16-65 KiB depending on
    # the allocator's state), not one that grows with time or bytes: bounded well under 128 KiB each.
    assert growth < 1000 * 128, growth
    # The header timeout ends them all: each socket sees EOF or a reset.
    deadline = time.monotonic() + 15
    closed = 0
    for s in held:
        s.settimeout(max(0.1, deadline - time.monotonic()))
        try:
            closed += s.recv(1024) == b""
        except (ConnectionResetError, ssl.SSLError):
            closed += 1
        except socket.timeout:
            pass
        s.close()
    assert closed == 1000, closed
    assert requests.get(https(fw), verify=str(certs.ca.cert), timeout=IO_TIMEOUT).status_code == 200
    # Their memory goes back to the kernel once they are gone (the worker trims the heap after a burst).
    after = wait_until(lambda: (lambda r: r if r < 2 * baseline else None)(rss_kib()), IO_TIMEOUT,
                       what="RSS back within twice the baseline")
    print(f"after they closed: RSS {after} KiB (baseline {baseline} KiB)")


def test_memory_stays_bounded_for_a_large_upload_over_tls(certs, upstream, formwall_factory, tmp_path):
    fw = formwall_factory(upstream.url, *tls_args(certs), "--single-process")
    size = 96 << 20
    body = tmp_path / "big.bin"
    with open(body, "wb") as f:
        block = os.urandom(1 << 20)
        for _ in range(size >> 20):
            f.write(block)
    peak = 0
    proc = subprocess.Popen(["curl", "-sS", "--cacert", str(certs.ca.cert), "-F", f"doc=@{body};filename=big.bin",
                             "--limit-rate", "200M", "-o", "/dev/null", "-w", "%{http_code}", https(fw, "/upload")],
                            stdout=subprocess.PIPE, text=True)
    while proc.poll() is None:
        for line in Path(f"/proc/{fw.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                peak = max(peak, int(line.split()[1]))
        time.sleep(0.05)   # sampling interval of a measurement, not a wait for readiness
    assert proc.stdout.read() == "200"
    print(f"96 MiB multipart over TLS: formwall peak RSS {peak / 1024:.1f} MiB")
    assert peak < 48 * 1024, peak
    rec = upstream.requests()[-1]
    assert rec["files"]["doc"][0]["size"] == size


# ---------------------------------------------------------------------------------------------------------------
# The upstream side


@pytest.fixture
def https_upstream(certs, upstream_factory):
    def start(pair=None, client_ca=None):
        pair = pair or certs.server
        extra = ["--tls-cert", str(pair.cert), "--tls-key", str(pair.key)]
        if client_ca:
            extra += ["--tls-client-ca", str(client_ca.cert)]
        return upstream_factory("echo", extra=extra)
    return start


def test_https_upstream_is_verified_and_connections_are_reused(certs, https_upstream, formwall_factory):
    up = https_upstream()
    fw = formwall_factory(f"https://localhost:{up.port}", "--upstream-ca", str(certs.ca.cert), "--workers", "1")
    session = requests.Session()
    for _ in range(5):
        r = session.post(fw.url + "/upload", files={"doc": ("a.txt", b"x" * 1000)}, timeout=IO_TIMEOUT)
        assert r.status_code == 200
    reqs = up.requests()
    assert len(reqs) == 5 and reqs[-1]["files"]["doc"][0]["size"] == 1000
    # Pooled: fewer TLS connections than requests.
    assert len({r["conn_id"] for r in reqs}) < 5, [r["conn_id"] for r in reqs]


@pytest.mark.parametrize("which,ca", [("wrong_host", "ca"), ("expired", "ca"), ("server", "other_ca")])
def test_unverifiable_upstreams_get_502(certs, https_upstream, formwall_factory, tmp_path, which, ca):
    """A certificate for another host, an expired one, and one from a CA that --upstream-ca does not trust."""
    up = https_upstream(getattr(certs, which))
    audit = tmp_path / "audit.log"
    fw = formwall_factory(f"https://localhost:{up.port}", "--upstream-ca", str(getattr(certs, ca).cert),
                          "--audit-log", str(audit))
    r = requests.post(fw.url + "/upload", files={"doc": ("a.txt", b"x")}, timeout=IO_TIMEOUT)
    assert r.status_code == 502 and r.json()["error"] == "upstream_tls_failed", r.text
    assert up.requests() == []
    [rec] = wait_audit(audit, 1)
    assert rec["decision"] == "error" and rec["bytes_upstream"] == 0
    [line] = wait_until(lambda: events_with(fw.stderr_text(), "upstream tls failed"), IO_TIMEOUT,
                        what="the upstream TLS failure log line")
    assert "verif" in line["error"].lower() or "certificate" in line["error"].lower(), line


def test_verification_off_is_explicit_and_loud(certs, https_upstream, formwall_factory):
    up = https_upstream(certs.expired)
    fw = formwall_factory(f"https://localhost:{up.port}", "--upstream-tls-verify", "off")
    assert requests.get(fw.url + "/x", timeout=IO_TIMEOUT).status_code == 200
    [line] = events_with(fw.stderr_text(), "upstream tls verification off")
    assert line["level"] == "error" and line["upstreams"] == [f"localhost:{up.port}"]


def test_mtls_to_the_upstream(certs, https_upstream, formwall_factory):
    up = https_upstream(client_ca=certs.ca)
    without = formwall_factory(f"https://localhost:{up.port}", "--upstream-ca", str(certs.ca.cert))
    assert requests.get(without.url + "/x", timeout=IO_TIMEOUT).status_code == 502
    with_cert = formwall_factory(f"https://localhost:{up.port}", "--upstream-ca", str(certs.ca.cert),
                                 "--upstream-tls-certificate", str(certs.client.cert),
                                 "--upstream-tls-key", str(certs.client.key))
    assert requests.get(with_cert.url + "/x", timeout=IO_TIMEOUT).status_code == 200


def test_backpressure_over_tls_with_a_slow_upstream(certs, formwall_factory, tmp_path):
    """An upstream that reads 64 KiB every 2 ms (about 32 MB/s) while a client pushes 64 MiB over TLS as fast as
    it can: Formwall stops reading from the client instead of buffering, so its RSS stays flat."""
    import threading
    listener = socket.socket()
    listener.bind((HOST, 0))
    listener.listen(4)
    received = []

    def slow_upstream():
        conn, _ = listener.accept()
        total = 0
        tail = b""
        with conn:
            while True:
                data = conn.recv(65536)
                if not data:
                    break
                total += len(data)
                # The last chunk is a line holding only "0"; no header line can be one (a head ending in
                # "…: 70\r\n\r\n" once ended this loop early), and the tail spans reads.
                tail = (tail + data)[-16:]
                if b"\r\n0\r\n\r\n" in tail:
                    break
                time.sleep(0.002)   # the behaviour under test: a slow reader
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
        received.append(total)

    t = threading.Thread(target=slow_upstream, daemon=True)
    t.start()
    fw = formwall_factory(f"http://{HOST}:{listener.getsockname()[1]}", *tls_args(certs), "--single-process",
                          "--workers", "1")
    body = tmp_path / "big.bin"
    with open(body, "wb") as f:
        block = os.urandom(1 << 20)
        for _ in range(64):
            f.write(block)
    proc = subprocess.Popen(["curl", "-sS", "--cacert", str(certs.ca.cert), "-F", f"doc=@{body};filename=big.bin",
                             "-o", "/dev/null", "-w", "%{http_code}", https(fw, "/upload")], stdout=subprocess.PIPE,
                            text=True)
    peak = 0
    while proc.poll() is None:
        for line in Path(f"/proc/{fw.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                peak = max(peak, int(line.split()[1]))
        time.sleep(0.05)   # sampling interval of a measurement
    t.join(timeout=IO_TIMEOUT)
    listener.close()
    assert proc.stdout.read() == "200"
    assert received and received[0] > 64 << 20
    print(f"64 MiB over TLS to a 32 MB/s upstream: formwall peak RSS {peak / 1024:.1f} MiB")
    assert peak < 40 * 1024, peak


def test_tls_from_the_configuration_file(certs, upstream, formwall_factory, tmp_path):
    tls_port, plain = free_port(), free_port()
    conf = tmp_path / "formwall.conf"
    conf.write_text(f"""
listen https://{HOST}:{tls_port};
listen http://{HOST}:{plain};
upstream {upstream.url};
tls-certificate {certs.server.cert};
tls-key {certs.server.key};
tls-certificate {certs.other.cert};
tls-key {certs.other.key};
tls-min-version 1.2;
""")
    fw = formwall_factory(None, "--config", str(conf), port=tls_port)
    assert requests.get(f"https://localhost:{tls_port}/", verify=str(certs.ca.cert), timeout=IO_TIMEOUT).status_code == 200
    with handshake(tls_port, server_name="b.test", version=ssl.TLSVersion.TLSv1_2) as s:
        assert peer_cn(s) == "b.test" and s.version() == "TLSv1.2"
    assert requests.get(f"http://{HOST}:{plain}/", timeout=IO_TIMEOUT).status_code == 200
