"""A loopback TCP relay into a container that has no network, through `docker exec`.

Why: restoreproof's own process sometimes needs a TCP connection to a server that runs in a
disposable target (a data check on the restored database), and the target must keep no way out.
Targets run with `network_mode="none"`. A Docker `--internal` network was measured and rejected: it
blocks the internet, but the container still reaches every host service bound to 0.0.0.0 through
the bridge's gateway address, so it is a way out. The relay adds no network to the container at all.

How: a listener on the host's 127.0.0.1 (an ephemeral port, nothing else can reach it). For each
accepted connection the relay starts a command in the container with `exec_create` and attaches to
it with `exec_start(socket=True)`: the engine answers `101 UPGRADED` and hands over the raw API
connection. The command (bash and cat only, see RELAY_SCRIPT) connects its stdin and stdout to
127.0.0.1:<port> inside the container.

- host -> container: the client's bytes are written as they are into the attached socket (the
  command's stdin).
- container -> host: without a tty the engine frames the command's output, each frame an 8-byte
  header (stream byte, 3 zero bytes, big-endian uint32 length) and its payload; FrameDemuxer takes
  the frames apart and only stdout's payload reaches the client. stderr is not attached.
- The client closes (or half-closes) its side: the attached socket is shut for writing and the
  command sees the end of its stdin. bash cannot half-close a /dev/tcp socket, so the server's answer
  gets `half_close_grace` seconds to come through, then the command closes its connection to the
  server and exits; the stream ends and the client's connection is closed.
- The server closes: the command exits within a tick (0.1 s), the stream ends and the client sees
  its connection closed after every byte the server sent.
- Nothing listens at the port inside: the command exits 7 at once, the stream ends and the client
  sees its connection closed: no hang (and the log says why).
- `close()` (or leaving the `with` block) stops accepting, shuts every open connection and its
  attached socket (the engine then closes the command's stdin and the command exits, after the
  grace when its server stays silent), joins every thread (daemon threads named
  `restoreproof-relay-*`) and checks with `exec_inspect` that no relay command still runs in the
  container.

The engine writes its 101 answer before it starts the command, so nothing the command writes can
arrive with the HTTP headers (never seen in practice); should a quick server that speaks first
get bytes there, they are taken from the HTTP response's buffer before the socket is read directly.

While the relay is open, any process of the host can connect to its port (loopback only): the
server's own authentication is what stands between them and the data.

Nothing here logs a connection's bytes: the log says which connection, what happened and how many
bytes, never what.
"""

from __future__ import annotations

import contextlib
import logging
import math
import socket
import struct
import threading
import time
from collections.abc import Iterator
from typing import Any

import docker.errors
import requests
from docker.models.containers import Container

import docker
from verification.errors import TargetError
from verification.targets.listening import Listening, shutdown

log = logging.getLogger(__name__)

# Run as `bash -c RELAY_SCRIPT relay PORT GRACE_TICKS`. bash and cat only (every Debian or Ubuntu image
# has them). The connect comes first: when it fails, the command exits 7, its stdout still empty.
# Then one cat copies the server's bytes to stdout, one copies stdin to the server, and bash watches
# both. The engine ends the stream only when the command's main process exits, so bash must notice
# either cat ending; `wait -n` cannot do it without a race (bash 5.2 does not count a child that
# ended before the call, and would then wait for the other one for good), so bash looks every
# tick (0.1 s, `read -t` on a pipe nobody writes: a sleep without a process).
# - the server closed: the reader ends, the writer is stopped, the command exits;
# - stdin ended (the client closed, or the relay did): the server's answer still gets GRACE_TICKS
#   ticks (a half-closing client waits for it; bash cannot pass a half-close on), then both stop.
# bash waits for both cats, so nothing is left behind: a container's PID 1 need not reap orphans.
# stderr goes nowhere (it is not attached); bash closes its own stdout so only the reader holds it.
RELAY_SCRIPT = """exec 2>/dev/null
exec 3<>"/dev/tcp/127.0.0.1/$1" || exit 7
cat <&3 & reader=$!
cat <&0 >&3 & writer=$!
exec >&- 4<> <(:)
ticks=0
while kill -0 "$reader"; do
  if ! kill -0 "$writer"; then
    ticks=$((ticks + 1))
    [ "$ticks" -gt "$2" ] && break
  fi
  read -t 0.1 -u 4
done
kill "$reader" "$writer"
wait
"""
TICK_SECONDS = 0.1
INNER_CONNECT_FAILED = 7

STDIN, STDOUT, STDERR, SYSTEMERR = 0, 1, 2, 3
HEADER = struct.Struct(">BxxxL")
CHUNK = 256 * 1024
# After the container side ended and the client was told (FIN), how long its side may stay open
# before the relay closes it anyway.
LINGER_SECONDS = 2.0
# How long the command may take to exit after its connection closed, beyond the half-close grace.
EXEC_END_SECONDS = 5.0


class FrameDemuxer:
    """Takes the engine's multiplexed stream apart, whatever the sizes of the reads it is fed.

    feed() yields (stream, payload) pieces as views into the data fed (no copy): a frame split over
    several reads comes out as several pieces of the same stream, in order.
    """

    def __init__(self) -> None:
        self._header = bytearray()
        self._stream = STDOUT
        self._remaining = 0

    @property
    def mid_frame(self) -> bool:
        """True when the data fed so far ends inside a frame (its header or its payload)."""
        return bool(self._header) or self._remaining > 0

    def feed(self, data: bytes | bytearray | memoryview) -> Iterator[tuple[int, memoryview]]:
        view = memoryview(data)
        position, end = 0, len(view)
        while position < end:
            if self._remaining == 0:
                take = min(HEADER.size - len(self._header), end - position)
                self._header += view[position:position + take]
                position += take
                if len(self._header) == HEADER.size:
                    self._stream, self._remaining = HEADER.unpack(self._header)
                    self._header.clear()
                continue
            take = min(self._remaining, end - position)
            self._remaining -= take
            yield self._stream, view[position:position + take]
            position += take


class _Connection:
    """One accepted client and the relay command serving it: two threads, one per direction."""

    def __init__(self, relay: Relay, number: int, client: socket.socket) -> None:
        self.relay = relay
        self.number = number
        self.client = client
        self.label = f"relay {relay.port}->{relay.container_name}:{relay.container_port} #{number}"
        self.exec_id: str | None = None
        self.exit_code: int | None = None
        self.still_running = False
        self.bytes_in = 0
        self.bytes_out = 0
        self._attached: Any = None        # what exec_start returned (a SocketIO on the Unix transport)
        self._stream: socket.socket | None = None
        self._read_ahead = b""
        self._lock = threading.Lock()
        self._aborted = False
        self._upstream: threading.Thread | None = None
        self.thread = threading.Thread(target=self._run, daemon=True,
                                       name=f"restoreproof-relay-{relay.port}-{number}")

    def abort(self) -> None:
        """Wake both threads (their reads return), from any thread; the owner thread closes the sockets."""
        with self._lock:
            self._aborted = True
            stream = self._stream
        shutdown(self.client, socket.SHUT_RDWR)
        shutdown(stream, socket.SHUT_RDWR)

    def _run(self) -> None:
        try:
            if not self._attach():
                return
            self._upstream = threading.Thread(target=self._client_to_container, daemon=True,
                                              name=f"restoreproof-relay-{self.relay.port}-{self.number}-in")
            self._upstream.start()
            self._container_to_client()
            # The container side has ended: tell the client (FIN after everything sent), give it a
            # moment to close its side, then close it anyway.
            shutdown(self.client, socket.SHUT_WR)
            self._upstream.join(LINGER_SECONDS)
        except Exception:  # a thread must not die silently; its connection is closed below
            log.exception("%s: relay failed", self.label)
        finally:
            self.abort()
            if self._upstream is not None:
                self._upstream.join()
            self._release()
            self._wait_for_exec_end()
            self.relay._forget(self)

    def _attach(self) -> bool:
        relay = self.relay
        api = relay.client.api
        try:
            self.exec_id = api.exec_create(relay.container_id, relay.command, stdin=True, stdout=True, stderr=False,
                                           tty=False)["Id"]
            attached = api.exec_start(self.exec_id, socket=True)
        except (docker.errors.DockerException, requests.exceptions.RequestException, OSError) as exc:
            log.warning("%s: cannot start the relay command in the container: %s", self.label, exc)
            return False
        stream: socket.socket = getattr(attached, "_sock", attached)
        with self._lock:
            self._attached, self._stream = attached, stream
            if self._aborted:   # close() came while the command was being started
                shutdown(stream, socket.SHUT_RDWR)
                return False
        self._read_ahead = _take_read_ahead(attached, stream)
        stream.settimeout(None)   # a pooled connection may stay idle for long
        self.client.settimeout(None)
        return True

    def _container_to_client(self) -> None:
        assert self._stream is not None
        demuxer = FrameDemuxer()
        buffer = bytearray(CHUNK)
        view = memoryview(buffer)
        try:
            if self._read_ahead:
                self._forward(demuxer, self._read_ahead)
            while True:
                received = self._stream.recv_into(buffer)
                if received == 0:
                    break
                self._forward(demuxer, view[:received])
        except OSError as exc:
            log.debug("%s: container to client ended: %s", self.label, type(exc).__name__)
        if demuxer.mid_frame:
            log.debug("%s: the engine's stream ended inside a frame", self.label)

    def _forward(self, demuxer: FrameDemuxer, data: bytes | memoryview) -> None:
        for stream, payload in demuxer.feed(data):
            if stream == STDOUT:
                self.client.sendall(payload)
                self.bytes_out += len(payload)
            elif stream == SYSTEMERR:
                # The engine's own error about the exec (not the connection's bytes).
                log.warning("%s: the Docker engine reported an error on the relay stream: %s", self.label,
                            bytes(payload[:300]).decode("utf-8", "replace"))
            # stderr is not attached; stdin (0) carries nothing here.

    def _client_to_container(self) -> None:
        assert self._stream is not None
        buffer = bytearray(CHUNK)
        view = memoryview(buffer)
        try:
            while True:
                received = self.client.recv_into(buffer)
                if received == 0:
                    # The client is done sending: the command's stdin ends, and with it the command.
                    self._stream.shutdown(socket.SHUT_WR)
                    return
                self._stream.sendall(view[:received])
                self.bytes_in += received
        except OSError as exc:
            log.debug("%s: client to container ended: %s", self.label, type(exc).__name__)
            self.abort()

    def _release(self) -> None:
        with self._lock:
            attached, stream = self._attached, self._stream
        for closable in (stream, attached, getattr(getattr(attached, "_response", None), "raw", None), self.client):
            if closable is not None:
                with contextlib.suppress(Exception):
                    closable.close()

    def _wait_for_exec_end(self) -> None:
        """The command exits when its stdin ends or its connection inside closes; make sure it did."""
        if self.exec_id is None or self._attached is None:
            return
        deadline = time.monotonic() + self.relay.exec_end_seconds
        pause = 0.005
        while True:
            try:
                state = self.relay.client.api.exec_inspect(self.exec_id)
            except Exception as exc:  # the engine went away: the container goes with it
                log.debug("%s: cannot inspect the relay command: %s", self.label, type(exc).__name__)
                return
            if not state.get("Running"):
                self.exit_code = state.get("ExitCode")
                break
            if time.monotonic() >= deadline:
                self.still_running = True
                log.warning("%s: the relay command still runs in the container %.0f s after its connection "
                            "closed", self.label, self.relay.exec_end_seconds)
                return
            time.sleep(pause)
            pause = min(pause * 2, 0.1)
        if self.exit_code == INNER_CONNECT_FAILED:
            log.warning("%s: nothing accepted the connection at 127.0.0.1:%d inside the container",
                        self.label, self.relay.container_port)
        else:
            log.debug("%s: closed (%d bytes in, %d bytes out, exit %s)", self.label, self.bytes_in,
                      self.bytes_out, self.exit_code)


def _take_read_ahead(attached: Any, stream: socket.socket) -> bytes:
    """Bytes the HTTP client buffered past the 101 answer's headers (a server that speaks first and
    was quick), which reading the socket directly would skip."""
    buffered = getattr(getattr(getattr(getattr(attached, "_response", None), "raw", None), "_fp", None), "fp", None)
    peek = getattr(buffered, "peek", None)
    if peek is None:
        return b""
    stream.setblocking(False)   # peek() reads the socket only when its buffer is empty: never wait here
    try:
        data = peek()
    except (OSError, ValueError):
        data = b""
    finally:
        stream.settimeout(None)
    return bytes(data or b"")


class Relay(Listening[_Connection]):
    """Loopback TCP port on the host whose connections reach 127.0.0.1:`container_port` in `container`.

    with Relay(client, container, port_inside) as relay:
        connect(host=relay.host, port=relay.port)
    """

    family = socket.AF_INET
    kind = "relay"

    def __init__(self, client: docker.DockerClient, container: Container, container_port: int, *,
                 host: str = "127.0.0.1", half_close_grace: float = 1.0) -> None:
        if not 0 < container_port < 65536:
            raise ValueError(f"not a TCP port: {container_port}")
        super().__init__()
        ticks = max(0, math.ceil(half_close_grace / TICK_SECONDS))
        self.command = ["bash", "-c", RELAY_SCRIPT, "relay", str(container_port), str(ticks)]
        self.exec_end_seconds = ticks * TICK_SECONDS + EXEC_END_SECONDS
        self.client = client
        self.container_id: str = container.id or ""
        self.container_name: str = container.name or self.container_id[:12]
        self.container_port = container_port
        self.host = host
        self.port = 0
        self._stray: list[str] = []

    @property
    def address(self) -> tuple[str, int]:
        return self.host, self.port

    def _bind(self, listener: socket.socket) -> None:
        listener.bind((self.host, 0))
        self.port = listener.getsockname()[1]

    def _listen_failed(self, exc: OSError) -> TargetError:
        self.port = 0
        return TargetError(f"cannot listen on {self.host} for a relay to {self.container_name}: {exc}")

    def _acceptor_name(self) -> str:
        return f"restoreproof-relay-{self.port}-accept"

    def _prepare(self, sock: socket.socket) -> None:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def _connection(self, number: int, sock: socket.socket) -> _Connection:
        return _Connection(self, number, sock)

    def _accept_failed(self, exc: OSError) -> None:
        log.warning("relay %d: accept failed: %s", self.port, exc)

    def _forgotten(self, connection: _Connection) -> None:
        if connection.still_running:
            self._stray.append(connection.exec_id or "?")

    def _close_seconds(self) -> float:
        return LINGER_SECONDS + self.exec_end_seconds + 5.0

    def _leftovers(self) -> list[str]:
        with self._lock:
            stray = list(self._stray)
        return [f"{len(stray)} relay command(s) still running in container {self.container_name}"] if stray else []

    def _description(self) -> str:
        return f"relay {self.port} to {self.container_name}:{self.container_port}"
