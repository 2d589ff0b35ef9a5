"""The egress link's host side without Docker: endpoints as URLs name them, and the Unix-socket bridge
against a real TCP server on 127.0.0.1 (tests/integration/test_egress.py runs the whole link in a
container that has no network)."""

from __future__ import annotations

import contextlib
import hashlib
import random
import socket
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from verification.errors import TargetError
from verification.targets.egress import Endpoint, SocketBridge, _proc_net_address


def test_an_endpoint_from_its_url() -> None:
    assert Endpoint.from_url("https://127.0.0.1:9443") == Endpoint("127.0.0.1", 9443)
    assert Endpoint.from_url("https://s3.eu-west-1.amazonaws.com") == Endpoint("s3.eu-west-1.amazonaws.com", 443)
    assert Endpoint.from_url("http://minio.internal") == Endpoint("minio.internal", 80)
    with_bucket = Endpoint.from_url("https://s3.example.com:8443", "bucket.s3.example.com")
    assert with_bucket.names == ("bucket.s3.example.com",)
    for bad in ("s3.example.com", "https://:443", "ftp://host", "https://host:99999"):
        with pytest.raises(TargetError):
            Endpoint.from_url(bad)


def test_where_the_forwarder_listens_and_which_names_it_takes() -> None:
    local = Endpoint("127.0.0.1", 9443)
    assert (local.listen_address, local.host_names) == ("127.0.0.1", ())
    other_loopback = Endpoint("127.0.0.5", 9443)
    assert other_loopback.listen_address == "127.0.0.5"
    named = Endpoint("s3.example.com", 443, ("b.s3.example.com", "s3.example.com"))
    # The names resolve to the forwarder; each once.
    assert (named.listen_address, named.host_names) == ("127.0.0.1", ("s3.example.com", "b.s3.example.com"))
    assert _proc_net_address("127.0.0.1") == "0100007F"
    assert _proc_net_address("::1") == "00000000000000000000000001000000"


@pytest.mark.parametrize("host", ["10.1.2.3", "192.168.0.10", "::1", "[::1]", "172.17.0.1"])
def test_an_address_a_networkless_container_cannot_have_is_refused(host: str) -> None:
    with pytest.raises(TargetError, match="IP address a container without a network cannot be given"):
        Endpoint(host, 443)


def test_names_must_be_names() -> None:
    for bad in ("10.0.0.1", "", "a b"):
        with pytest.raises(TargetError, match="not a host name"):
            Endpoint("s3.example.com", 443, (bad,))
    with pytest.raises(TargetError, match="not a TCP port"):
        Endpoint("s3.example.com", 0)


class Upstream:
    """A TCP server on 127.0.0.1: reads until the client half-closes, then answers with the SHA-256 of
    what it got and `reply` bytes, and closes. Counts its connections."""

    def __init__(self, reply: bytes) -> None:
        self.reply = reply
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.connections = 0
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: socket.socket) -> None:
        with conn:
            digest = hashlib.sha256()
            while chunk := conn.recv(65536):
                digest.update(chunk)
            conn.sendall(digest.hexdigest().encode() + self.reply)

    def close(self) -> None:
        self.listener.close()


@pytest.fixture
def folder() -> Iterator[Path]:
    # Short: a Unix socket's path must fit in 108 bytes.
    with tempfile.TemporaryDirectory(prefix="rp-e-") as name:
        yield Path(name)


def exchange(path: Path, payload: bytes) -> bytes:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
        client.settimeout(30)
        client.connect(str(path))
        client.sendall(payload)
        client.shutdown(socket.SHUT_WR)
        received = bytearray()
        try:
            while chunk := client.recv(65536):
                received += chunk
        except ConnectionResetError:  # closed with our bytes unread: the end all the same
            pass
        return bytes(received)


def egress_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("restoreproof-egress")]


def test_bytes_go_through_both_ways_with_half_closes(folder: Path) -> None:
    reply = random.Random(3).randbytes(3 << 20)
    upstream = Upstream(reply)
    try:
        path = folder / "egress.sock"
        with SocketBridge(path, Endpoint("127.0.0.1", upstream.port)) as bridge:
            assert path.is_socket() and path.stat().st_mode & 0o777 == 0o666
            for size in (0, 1, 5 << 20):
                payload = random.Random(size).randbytes(size)
                answer = exchange(path, payload)
                assert answer == hashlib.sha256(payload).hexdigest().encode() + reply
            assert bridge.accepted == 3 and upstream.connections == 3
        assert not path.exists() and egress_threads() == []
    finally:
        upstream.close()


def test_many_connections_at_once(folder: Path) -> None:
    upstream = Upstream(b"ok")
    try:
        path = folder / "egress.sock"
        with SocketBridge(path, Endpoint("127.0.0.1", upstream.port)) as bridge:
            results: list[bytes] = []
            threads = [threading.Thread(target=lambda n=n: results.append(exchange(path, bytes([n]) * 100_000)))
                       for n in range(16)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(60)
            assert sorted(results) == sorted(hashlib.sha256(bytes([n]) * 100_000).hexdigest().encode() + b"ok"
                                             for n in range(16))
            assert bridge.accepted == 16
        assert egress_threads() == []
    finally:
        upstream.close()


def test_an_unreachable_endpoint_closes_the_connection_at_once(folder: Path,
                                                               caplog: pytest.LogCaptureFixture) -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    path = folder / "egress.sock"
    with SocketBridge(path, Endpoint("127.0.0.1", port)):
        started = time.monotonic()
        assert exchange(path, b"secret-bytes") == b""
        assert time.monotonic() - started < 5
    assert "cannot connect to the endpoint" in caplog.text
    # The log never carries a connection's bytes.
    assert "secret-bytes" not in caplog.text
    assert egress_threads() == []


def test_close_ends_open_connections(folder: Path) -> None:
    upstream = Upstream(b"")
    try:
        path = folder / "egress.sock"
        bridge = SocketBridge(path, Endpoint("127.0.0.1", upstream.port)).start()
        client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        client.settimeout(10)
        client.connect(str(path))
        client.sendall(b"never half-closed")
        deadline = time.monotonic() + 10
        while bridge.open_connections == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert bridge.open_connections == 1
        bridge.close()
        with contextlib.suppress(ConnectionResetError):  # reset: its bytes were never all read
            assert client.recv(10) == b""   # the client sees its connection closed
        client.close()
        assert bridge.open_connections == 0 and egress_threads() == [] and not path.exists()
        bridge.close()  # twice is fine
    finally:
        upstream.close()


def test_a_socket_that_cannot_be_made_is_a_clear_error(folder: Path) -> None:
    with pytest.raises(TargetError, match=r"cannot listen on .*missing.*for a way to 127.0.0.1:9"):
        SocketBridge(folder / "missing" / "egress.sock", Endpoint("127.0.0.1", 9)).start()
    assert egress_threads() == []
