"""The shared listener against real loopback sockets: an echo server made from it, and one whose
connections will not end, so that close() must say so."""

from __future__ import annotations

import socket
import threading

import pytest

from verification.errors import TargetError
from verification.targets.listening import Listening


class _Echo:
    def __init__(self, server: EchoServer, sock: socket.socket, stuck: bool) -> None:
        self.server, self.sock, self.stuck = server, sock, stuck
        self.thread = threading.Thread(target=self._run, daemon=True, name=f"test-echo-{server.accepted}")

    def abort(self) -> None:
        if not self.stuck:  # a stuck one ends only when its client closes
            self.sock.shutdown(socket.SHUT_RDWR)

    def _run(self) -> None:
        try:
            while data := self.sock.recv(1024):
                self.sock.sendall(data)
        finally:
            self.sock.close()
            self.server._forget(self)


class EchoServer(Listening[_Echo]):
    family = socket.AF_INET
    kind = "echo"

    def __init__(self, stuck: bool = False) -> None:
        super().__init__()
        self.stuck = stuck
        self.port = 0
        self.made: list[_Echo] = []

    def _bind(self, listener: socket.socket) -> None:
        listener.bind(("127.0.0.1", self.port))
        self.port = listener.getsockname()[1]

    def _listen_failed(self, exc: OSError) -> TargetError:
        return TargetError(f"cannot listen: {exc}")

    def _acceptor_name(self) -> str:
        return "test-echo-accept"

    def _connection(self, number: int, sock: socket.socket) -> _Echo:
        connection = _Echo(self, sock, self.stuck)
        self.made.append(connection)
        return connection

    def _accept_failed(self, exc: OSError) -> None:
        pass

    def _close_seconds(self) -> float:
        return 0.5

    def _description(self) -> str:
        return f"echo {self.port}"


def test_connections_are_served_counted_and_closed() -> None:
    with EchoServer() as server:
        clients = [socket.create_connection(("127.0.0.1", server.port), timeout=5) for _ in range(3)]
        for number, client in enumerate(clients):
            client.sendall(b"ping %d" % number)
            assert client.recv(1024) == b"ping %d" % number
        assert server.accepted == 3 and server.open_connections == 3
        with pytest.raises(RuntimeError, match="the echo is already started"):
            server.start()
    assert server.open_connections == 0
    assert all(not c.thread.is_alive() for c in server.made)
    for client in clients:
        assert client.recv(1024) == b""  # the server side was shut
        client.close()
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", server.port), timeout=1)


def test_a_connection_that_outlives_the_close_is_named() -> None:
    server = EchoServer(stuck=True).start()
    client = socket.create_connection(("127.0.0.1", server.port), timeout=5)
    client.sendall(b"x")
    assert client.recv(1) == b"x"
    with pytest.raises(TargetError, match=r"^echo \d+ did not close cleanly: threads still running: test-echo-1$"):
        server.close()
    client.close()
    server.made[0].thread.join(5)
    assert server.open_connections == 0


def test_a_listener_that_cannot_bind_raises_the_subclass_error() -> None:
    with EchoServer() as taken:
        clash = EchoServer()
        clash.port = taken.port
        with pytest.raises(TargetError, match=r"cannot listen: .*in use"):
            clash.start()
