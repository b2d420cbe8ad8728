"""Certificates for the TLS tests, made with the `openssl` CLI in a private directory (0700, keys 0600).

    certs = make_certs(tmp_path)
    certs.ca, certs.server (localhost, a.test, 127.0.0.1), certs.other (b.test), certs.wrong_host (wrong.test),
    certs.expired (localhost, not valid after 2020), certs.client (CN=alice), certs.other_ca

Each is a `Pair(cert, key)` of paths; `ca` and `other_ca` also sign. Nothing here reaches the network.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path


@dataclass
class Pair:
    cert: Path
    key: Path


@dataclass
class Certs:
    dir: Path
    ca: Pair
    other_ca: Pair
    server: Pair
    other: Pair
    wrong_host: Pair
    expired: Pair
    client: Pair
    foreign_client: Pair


def _run(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def _key(d: Path, name: str) -> Path:
    path = d / f"{name}.key"
    _run("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", str(path), cwd=d)
    os.chmod(path, 0o600)
    return path


def _ca(d: Path, name: str, cn: str) -> Pair:
    key = _key(d, name)
    cert = d / f"{name}.pem"
    _run("req", "-x509", "-new", "-key", str(key), "-out", str(cert), "-days", "30", "-subj", f"/CN={cn}",
         "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=d)
    return Pair(cert, key)


def _leaf(d: Path, ca: Pair, name: str, cn: str, sans: list[str], client: bool = False,
          not_after: str | None = None) -> Pair:
    key = _key(d, name)
    csr = d / f"{name}.csr"
    _run("req", "-new", "-key", str(key), "-out", str(csr), "-subj", f"/O=Formwall Tests/CN={cn}", cwd=d)
    ext = d / f"{name}.ext"
    lines = ["basicConstraints=CA:FALSE",
             f"extendedKeyUsage={'clientAuth' if client else 'serverAuth'}"]
    if sans:
        lines.append("subjectAltName=" + ",".join(sans))
    ext.write_text("\n".join(lines) + "\n")
    cert = d / f"{name}.pem"
    if not_after:
        # `openssl ca` takes explicit dates; a minimal CA database in the directory.
        db = d / f"{name}-db"
        db.mkdir()
        (db / "index.txt").write_text("")
        (db / "serial").write_text("01\n")
        conf = d / f"{name}-ca.cnf"
        conf.write_text(f"""[ca]
default_ca = dflt
[dflt]
database = {db}/index.txt
serial = {db}/serial
new_certs_dir = {db}
default_md = sha256
policy = anything
copy_extensions = none
[anything]
commonName = supplied
organizationName = optional
""")
        _run("ca", "-batch", "-config", str(conf), "-cert", str(ca.cert), "-keyfile", str(ca.key), "-in", str(csr),
             "-out", str(cert), "-startdate", "20190101000000Z", "-enddate", not_after, "-extfile", str(ext),
             "-notext", cwd=d)
    else:
        _run("x509", "-req", "-in", str(csr), "-CA", str(ca.cert), "-CAkey", str(ca.key), "-CAcreateserial",
             "-out", str(cert), "-days", "30", "-extfile", str(ext), cwd=d)
    return Pair(cert, key)


def make_certs(base: Path) -> Certs:
    d = base / "certs"
    d.mkdir(mode=0o700)
    ca = _ca(d, "ca", "Formwall Test CA")
    other_ca = _ca(d, "other-ca", "Some Other CA")
    return Certs(
        dir=d, ca=ca, other_ca=other_ca,
        server=_leaf(d, ca, "server", "localhost", ["DNS:localhost", "DNS:a.test", "IP:127.0.0.1"]),
        other=_leaf(d, ca, "other", "b.test", ["DNS:b.test"]),
        wrong_host=_leaf(d, ca, "wrong", "wrong.test", ["DNS:wrong.test"]),
        expired=_leaf(d, ca, "expired", "localhost", ["DNS:localhost", "IP:127.0.0.1"], not_after="20200101000000Z"),
        client=_leaf(d, ca, "client", "alice", [], client=True),
        foreign_client=_leaf(d, other_ca, "foreign", "mallory", [], client=True),
    )
