"""The relay's host side without Docker: the frame demultiplexer, and a fake engine behind a socket
pair standing in for `exec_start(socket=True)` (tests/integration/test_relay.py runs the real one)."""

from __future__ import annotations

import contextlib
import logging
import socket
import struct
import threading
import time
from types import SimpleNamespace
from typing import Any

import docker.errors
import pytest

from verification.errors import TargetError
from verification.targets.relay import INNER_CONNECT_FAILED, RELAY_SCRIPT, STDERR, STDOUT, FrameDemuxer, Relay


def frame(stream: int, payload: bytes) -> bytes:
    return struct.pack(">BxxxL", stream, len(payload)) + payload


def demux_all(demuxer: FrameDemuxer, data: bytes, piece: int) -> list[tuple[int, bytes]]:
    out: list[tuple[int, bytes]] = []
    for start in range(0, len(data), piece):
        for stream, payload in demuxer.feed(data[start:start + piece]):
            if out and out[-1][0] == stream:
                out[-1] = (stream, out[-1][1] + bytes(payload))
            else:
                out.append((stream, bytes(payload)))
    return out


BIG = bytes(range(256)) * 300   # 76,800 bytes: a length whose every header byte matters (0x00012C00)
STREAM = (frame(STDOUT, b"hello ") + frame(STDERR, b"an error") + frame(STDOUT, b"") + frame(STDOUT, BIG)
          + frame(STDOUT, b"\x00\x01\x00\x00\x00\x00\x00\x05") + frame(STDERR, b"!"))


@pytest.mark.parametrize("piece", [1, 3, 7, 8, 9, 4096, len(STREAM)])
def test_the_demuxer_takes_frames_apart_whatever_the_read_sizes(piece: int) -> None:
    demuxer = FrameDemuxer()
    assert demux_all(demuxer, STREAM, piece) == [
        (STDOUT, b"hello "), (STDERR, b"an error"), (STDOUT, BIG + b"\x00\x01\x00\x00\x00\x00\x00\x05"),
        (STDERR, b"!")]
    assert not demuxer.mid_frame


def test_the_demuxer_knows_when_a_stream_stops_inside_a_frame() -> None:
    demuxer = FrameDemuxer()
    assert list(demuxer.feed(frame(STDOUT, b"abc")[:5])) == []
    assert demuxer.mid_frame
    demuxer = FrameDemuxer()
    assert [bytes(p) for _, p in demuxer.feed(frame(STDOUT, b"abcdef")[:10])] == [b"ab"]
    assert demuxer.mid_frame


def test_the_relay_command_needs_only_bash_and_cat() -> None:
    words = {w for line in RELAY_SCRIPT.splitlines() for w in line.replace(";", " ").split()}
    assert "cat" in words and "/dev/tcp/127.0.0.1/$1\"" in RELAY_SCRIPT.replace("\"/dev", "/dev")
    for tool in ("nc", "socat", "perl", "python3", "timeout", "sleep", "mkfifo"):
        assert tool not in words


class FakeEngine:
    """exec_create/exec_start/exec_inspect of the low-level API; each exec's far end is served by
    `serve(engine_side_socket)` in a thread, as dockerd would run the command."""

    def __init__(self, serve: Any, exit_code: int = 0, first: bytes = b"", wrap: Any = None) -> None:
        self.serve = serve
        self.exit_code = exit_code
        self.first = first   # on the wire before exec_start returns
        self.wrap = wrap
        self.created: list[tuple[str, list[str], dict[str, Any]]] = []
        self.running: dict[str, bool] = {}
        self.threads: list[threading.Thread] = []

    def exec_create(self, container: str, cmd: list[str], **kwargs: Any) -> dict[str, str]:
        exec_id = f"exec{len(self.created)}"
        self.created.append((container, cmd, kwargs))
        return {"Id": exec_id}

    def exec_start(self, exec_id: str, socket: bool = False) -> Any:
        assert socket
        ours, theirs = socket_pair()
        theirs.sendall(self.first)
        self.running[exec_id] = True

        def run() -> None:
            try:
                self.serve(theirs)
            finally:
                theirs.close()
                self.running[exec_id] = False

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        self.threads.append(thread)
        return self.wrap(ours) if self.wrap else SimpleNamespace(_sock=ours)

    def exec_inspect(self, exec_id: str) -> dict[str, Any]:
        return {"Running": self.running[exec_id], "ExitCode": None if self.running[exec_id] else self.exit_code}


def socket_pair() -> tuple[socket.socket, socket.socket]:
    return socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)


def fake_client(api: Any) -> Any:
    return SimpleNamespace(api=api)


CONTAINER = SimpleNamespace(id="f00dfeed" * 8, name="restoreproof-unit")


def read_to_end(sock: socket.socket, timeout: float = 5.0) -> bytes:
    sock.settimeout(timeout)
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    return data


def relay_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("restoreproof-relay")]


def echo_upper(engine_side: socket.socket) -> None:
    """Reads stdin to its end, answers in odd-sized frames with stderr mixed in, then ends."""
    received = read_to_end(engine_side)
    answer = received.upper()
    out = frame(STDERR, b"noise") + b"".join(frame(STDOUT, answer[i:i + 1000]) for i in range(0, len(answer), 1000))
    for i in range(0, len(out), 777):
        engine_side.sendall(out[i:i + 777])


def test_bytes_go_both_ways_and_a_half_close_gets_the_whole_answer() -> None:
    engine = FakeEngine(echo_upper)
    payload = bytes(range(97, 123)) * 20000   # 520,000 bytes
    with Relay(fake_client(engine), CONTAINER, 5555) as relay, \
            socket.create_connection(relay.address, timeout=5) as client:
        client.sendall(payload)
        client.shutdown(socket.SHUT_WR)          # half-close: the answer must still come
        assert read_to_end(client) == payload.upper()
    container, cmd, options = engine.created[0]
    assert container == CONTAINER.id
    assert cmd[:3] == ["bash", "-c", RELAY_SCRIPT] and cmd[4] == "5555"
    assert options == {"stdin": True, "stdout": True, "stderr": False, "tty": False}
    assert relay_threads() == []


def test_the_end_of_the_container_side_closes_the_client_at_once() -> None:
    def refuse(engine_side: socket.socket) -> None:
        pass   # as the command does when its connect fails: no output, the stream ends

    engine = FakeEngine(refuse, exit_code=INNER_CONNECT_FAILED)
    logs: list[str] = []
    handler = _ListHandler(logs)
    logger = logging.getLogger("verification.targets.relay")
    logger.addHandler(handler)
    try:
        with Relay(fake_client(engine), CONTAINER, 5556) as relay, \
                socket.create_connection(relay.address, timeout=5) as client:
            started = time.monotonic()
            assert read_to_end(client) == b""
            assert time.monotonic() - started < 1.0
    finally:
        logger.removeHandler(handler)
    assert any("nothing accepted the connection at 127.0.0.1:5556 inside the container" in line for line in logs)


class _ListHandler(logging.Handler):
    def __init__(self, lines: list[str]) -> None:
        super().__init__(logging.DEBUG)
        self.lines = lines

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def test_a_command_that_cannot_start_closes_the_client_and_logs_no_bytes(caplog: pytest.LogCaptureFixture) -> None:
    class Broken:
        def exec_create(self, *args: Any, **kwargs: Any) -> dict[str, str]:
            raise docker.errors.APIError("container is not running")

    with caplog.at_level(logging.DEBUG, logger="verification.targets.relay"), \
            Relay(fake_client(Broken()), CONTAINER, 5557) as relay, \
            socket.create_connection(relay.address, timeout=5) as client:
        client.sendall(b"SECRET-PAYLOAD")
        with contextlib.suppress(ConnectionResetError):   # unread bytes at the close make it a reset
            assert read_to_end(client) == b""
    assert "cannot start the relay command in the container: container is not running" in caplog.text
    assert "SECRET-PAYLOAD" not in caplog.text


def test_many_connections_at_once_each_get_their_own_answer() -> None:
    engine = FakeEngine(echo_upper)
    with Relay(fake_client(engine), CONTAINER, 5558) as relay:
        results: dict[int, bytes] = {}

        def one(number: int) -> None:
            with socket.create_connection(relay.address, timeout=5) as client:
                client.sendall(f"connection {number} ".encode() * 500)
                client.shutdown(socket.SHUT_WR)
                results[number] = read_to_end(client)

        threads = [threading.Thread(target=one, args=(n,)) for n in range(20)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(10)
    assert results == {n: f"CONNECTION {n} ".encode() * 500 for n in range(20)}
    assert len(engine.created) == 20


def test_close_ends_open_connections_and_refuses_new_ones() -> None:
    ended = threading.Event()

    def idle(engine_side: socket.socket) -> None:
        # A silent server: the stream ends only when the relay closes its side.
        read_to_end(engine_side, timeout=30)
        ended.set()

    engine = FakeEngine(idle)
    relay = Relay(fake_client(engine), CONTAINER, 5559).start()
    clients = [socket.create_connection(relay.address, timeout=5) for _ in range(3)]
    deadline = time.monotonic() + 5
    # Each connection's second thread starts after it is counted open: wait for all of them too.
    while relay.open_connections < 3 or len(engine.created) < 3 or len(relay_threads()) < 1 + 3 * 2:
        assert time.monotonic() < deadline, relay_threads()
        time.sleep(0.01)
    assert len(relay_threads()) == 1 + 3 * 2   # the acceptor, and two per connection
    relay.close()
    assert ended.is_set() and not any(engine.running.values())
    assert relay_threads() == []
    for client in clients:
        assert read_to_end(client) == b""
        client.close()
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(relay.address, timeout=5)
    relay.close()   # twice is fine


def test_close_ends_a_connection_whose_client_already_half_closed() -> None:
    """Only the container side is left, and it keeps going (empty frames): close() must still end it."""
    saw_eof, ended = threading.Event(), threading.Event()

    def keeps_going(engine_side: socket.socket) -> None:
        read_to_end(engine_side)
        saw_eof.set()
        try:
            while True:
                engine_side.sendall(frame(STDOUT, b""))
                time.sleep(0.01)
        except OSError:
            ended.set()

    engine = FakeEngine(keeps_going)
    relay = Relay(fake_client(engine), CONTAINER, 5562).start()
    with socket.create_connection(relay.address, timeout=5) as client:
        client.shutdown(socket.SHUT_WR)
        assert saw_eof.wait(5)
        started = time.monotonic()
        relay.close()
        assert time.monotonic() - started < 2.0
        assert ended.wait(5)
        assert read_to_end(client) == b""
    assert relay_threads() == []


def test_a_relay_command_that_outlives_its_connection_is_an_error_at_close(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("verification.targets.relay.EXEC_END_SECONDS", 0.2)
    engine = FakeEngine(lambda engine_side: None)
    engine.exec_inspect = lambda exec_id: {"Running": True, "ExitCode": None}  # type: ignore[method-assign]
    relay = Relay(fake_client(engine), CONTAINER, 5560, half_close_grace=0).start()
    with socket.create_connection(relay.address, timeout=5) as client:
        assert read_to_end(client) == b""
    with pytest.raises(TargetError, match=r"1 relay command\(s\) still running in container restoreproof-unit"):
        relay.close()


def test_bytes_the_http_client_read_ahead_are_not_lost() -> None:
    """A server that speaks first, and quickly: its first bytes may already sit in the buffer of the
    HTTP response that carried the 101 answer, past the point where the relay reads the socket."""
    def attached(ours: socket.socket) -> Any:
        buffered = ours.makefile("rb")
        assert buffered.peek(1)   # as http.client reading the headers: the greeting is in its buffer now
        response = SimpleNamespace(raw=SimpleNamespace(_fp=SimpleNamespace(fp=buffered)))
        return SimpleNamespace(_sock=ours, _response=response)

    def answer(engine_side: socket.socket) -> None:
        read_to_end(engine_side)
        engine_side.sendall(frame(STDOUT, b"bye\r\n"))

    engine = FakeEngine(answer, first=frame(STDOUT, b"220 ready\r\n"), wrap=attached)
    with Relay(fake_client(engine), CONTAINER, 5561) as relay, \
            socket.create_connection(relay.address, timeout=5) as client:
        client.shutdown(socket.SHUT_WR)
        assert read_to_end(client) == b"220 ready\r\nbye\r\n"


def test_a_bad_port_is_refused() -> None:
    with pytest.raises(ValueError, match="not a TCP port: 0"):
        Relay(fake_client(None), CONTAINER, 0)
