"""bench/proxy/relay.c, the byte relay bench/proxy/run.py measures as the least a proxy can do here: it must pass
every byte both ways unchanged, hold what a slow reader has not taken (backpressure) without losing it, and end a
pair when either side ends. Its figures in docs/performance.md are only an upper bound if it really relays."""

import hashlib
import os
import random
import shutil
import socket
import subprocess
import threading
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "bench" / "proxy" / "relay.c"


@pytest.fixture(scope="module")
def relay_binary(tmp_path_factory):
    if shutil.which("gcc") is None:
        pytest.skip("gcc not installed")
    exe = tmp_path_factory.mktemp("relay") / "relay"
    subprocess.run(["gcc", "-O2", "-Wall", "-Werror", "-pthread", "-o", str(exe), str(SOURCE)], check=True,
                   timeout=120)
    return exe


class Upstream:
    """A TCP server on 127.0.0.1: each connection answers every byte it reads with its SHA-256 once `expect`
    bytes have come. When `slow`, its receive buffer is small and it reads nothing for a while after accepting,
    so the relay's sends toward it meet a full socket and the relay must hold what it read."""

    def __init__(self, expect, slow=False):
        self.expect = expect
        self.slow = slow
        self.server = socket.socket()
        if slow:
            self.server.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 32 * 1024)  # inherited by accepted sockets
        self.server.bind(("127.0.0.1", 0))
        self.server.listen(16)
        # accept() wakes up every 0.1 s to see `stopped`: closing a socket does not wake a thread blocked on it.
        self.server.settimeout(0.1)
        self.port = self.server.getsockname()[1]
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        while not self.stopped.is_set():
            try:
                conn, _ = self.server.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            threading.Thread(target=self._one, args=(conn,), daemon=True).start()

    def _one(self, conn):
        with conn:
            conn.settimeout(20)
            digest = hashlib.sha256()
            got = 0
            try:
                if self.slow:
                    threading.Event().wait(0.5)
                while got < self.expect:
                    chunk = conn.recv(1 << 20)
                    if not chunk:
                        return
                    digest.update(chunk)
                    got += len(chunk)
                answer = digest.hexdigest().encode()
                # The answer is sent large too: the relay's other direction is exercised with it.
                conn.sendall(answer * 50_000)
            except OSError:
                return

    def close(self):
        self.stopped.set()
        self.thread.join(5)
        self.server.close()


def start_relay(exe, upstream_port, threads=1, buffer_kib=16):
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    proc = subprocess.Popen([str(exe), str(port), str(upstream_port), str(threads), str(buffer_kib)])
    for _ in range(500):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return proc, port
        except OSError:
            if proc.poll() is not None:
                raise AssertionError(f"relay exited with {proc.returncode}")
            threading.Event().wait(0.01)
    proc.kill()
    raise AssertionError("relay did not accept connections")


def exchange(port, payload, answer_len):
    with socket.create_connection(("127.0.0.1", port), timeout=20) as s:
        s.sendall(payload)
        received = bytearray()
        while len(received) < answer_len:
            chunk = s.recv(1 << 20)
            if not chunk:
                break
            received += chunk
        return bytes(received)


@pytest.mark.parametrize("slow", [False, True])
def test_every_byte_passes_both_ways(relay_binary, slow):
    rng = random.Random(1103)
    size = 3 * 1024 * 1024 + 17 if not slow else 12 * 1024 * 1024 + 3
    upstream = Upstream(size, slow=slow)
    proc, port = start_relay(relay_binary, upstream.port)
    try:
        payload = rng.randbytes(size)
        expected = hashlib.sha256(payload).hexdigest().encode() * 50_000
        results = [None] * 4

        def client(i):
            results[i] = exchange(port, payload, len(expected))

        clients = [threading.Thread(target=client, args=(i,)) for i in range(4)]
        for c in clients:
            c.start()
        for c in clients:
            c.join(60)
        assert all(r == expected for r in results), [len(r or b"") for r in results]
        assert proc.poll() is None, "the relay exited"
    finally:
        proc.kill()
        proc.wait()
        upstream.close()


def test_a_pair_ends_when_the_upstream_closes(relay_binary):
    upstream = Upstream(10)  # answers after 10 bytes, then closes its connection
    proc, port = start_relay(relay_binary, upstream.port)
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=20) as s:
            s.sendall(b"0123456789")
            received = bytearray()
            while True:
                chunk = s.recv(1 << 20)
                if not chunk:
                    break
                received += chunk
        assert bytes(received) == hashlib.sha256(b"0123456789").hexdigest().encode() * 50_000
        # The relay still serves new connections after closing that pair.
        assert exchange(port, b"abcdefghij", 64)[:64] == hashlib.sha256(b"abcdefghij").hexdigest().encode()
        assert proc.poll() is None
    finally:
        proc.kill()
        proc.wait()
        upstream.close()
