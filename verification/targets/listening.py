"""What a local listener whose every connection runs in its own thread needs, once: the listening
socket, the thread that accepts, the set of open connections and the close that leaves nothing
running (relay.py: a loopback TCP port into a container; egress.py: a Unix socket out to one endpoint).

A subclass says how the listener is bound and named, what a connection is, and what its messages
say; each connection has a `thread` (started here, once it is counted) and an `abort()` that wakes
it from any thread. The connection's thread calls `_forget` when it ends.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from types import TracebackType
from typing import Generic, Protocol, Self, TypeVar

from verification.errors import TargetError

# close() gives the acceptor this long to stop; shutting the listener wakes accept() on Linux, and its
# timeout (ACCEPT_TICK) ends it elsewhere.
ACCEPTOR_JOIN_SECONDS = 5.0
ACCEPT_TICK = 0.5
BACKLOG = 128
# After an accept failed (e.g. out of file descriptors): do not spin.
ACCEPT_RETRY_SECONDS = 0.1


class Accepted(Protocol):
    """One accepted connection as the listener sees it."""

    thread: threading.Thread

    def abort(self) -> None: ...


C = TypeVar("C", bound=Accepted)


def shutdown(sock: socket.socket | None, how: int) -> None:
    """shutdown() that tolerates a socket already gone (or never made)."""
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.shutdown(how)


class Listening(Generic[C]):
    """A listener, its accepting thread and its connections; `start()`, `close()`, or `with`."""

    family: socket.AddressFamily
    kind: str  # in "the <kind> is already started"

    def __init__(self) -> None:
        self.accepted = 0
        self._listener: socket.socket | None = None
        self._acceptor: threading.Thread | None = None
        self._connections: set[C] = set()
        self._lock = threading.Lock()
        self._closing = False

    # What a subclass says.

    def _bind(self, listener: socket.socket) -> None:
        """Bind the new listener (before listen())."""
        raise NotImplementedError

    def _listen_failed(self, exc: OSError) -> TargetError:
        """The error when the listener cannot be made (after removing what _bind left)."""
        raise NotImplementedError

    def _acceptor_name(self) -> str:
        raise NotImplementedError

    def _connection(self, number: int, sock: socket.socket) -> C:
        raise NotImplementedError

    def _accept_failed(self, exc: OSError) -> None:
        """Log an accept that failed (the loop goes on)."""
        raise NotImplementedError

    def _close_seconds(self) -> float:
        """How long close() waits for the connections' threads, all together."""
        raise NotImplementedError

    def _description(self) -> str:
        """Names this listener in "<description> did not close cleanly: ..."."""
        raise NotImplementedError

    def _prepare(self, sock: socket.socket) -> None:
        """Set up an accepted socket before its connection is made."""

    def _forgotten(self, connection: C) -> None:
        """A connection has ended (called under the lock)."""

    def _listener_closed(self) -> None:
        """The listener is closed: remove what it leaves behind."""

    def _leftovers(self) -> list[str]:
        """What else outlived the close, beyond threads (each a phrase for the error)."""
        return []

    # The shared part.

    def start(self) -> Self:
        if self._listener is not None:
            raise RuntimeError(f"the {self.kind} is already started")
        listener = socket.socket(self.family, socket.SOCK_STREAM)
        try:
            self._bind(listener)
            listener.listen(BACKLOG)
            # The close() shuts the listener, which wakes accept() on Linux; the timeout is for elsewhere.
            listener.settimeout(ACCEPT_TICK)
        except OSError as exc:
            listener.close()
            raise self._listen_failed(exc) from exc
        self._listener = listener
        self._acceptor = threading.Thread(target=self._accept, daemon=True, name=self._acceptor_name())
        self._acceptor.start()
        return self

    def __enter__(self) -> Self:
        return self.start() if self._listener is None else self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.close()

    @property
    def open_connections(self) -> int:
        with self._lock:
            return len(self._connections)

    def _accept(self) -> None:
        assert self._listener is not None
        while not self._closing:
            try:
                sock, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError as exc:
                if self._closing:
                    return
                self._accept_failed(exc)
                time.sleep(ACCEPT_RETRY_SECONDS)
                continue
            self._prepare(sock)
            with self._lock:
                if self._closing:
                    sock.close()
                    return
                self.accepted += 1
                connection = self._connection(self.accepted, sock)
                self._connections.add(connection)
            connection.thread.start()

    def _forget(self, connection: C) -> None:
        with self._lock:
            self._connections.discard(connection)
            self._forgotten(connection)

    def close(self) -> None:
        """Stop accepting, close every connection, join every thread.

        Raises TargetError when a thread (or what _leftovers names) outlived the close (after trying)."""
        with self._lock:
            if self._closing:
                return
            self._closing = True
        if self._listener is not None:
            shutdown(self._listener, socket.SHUT_RDWR)
            self._listener.close()
        self._listener_closed()
        if self._acceptor is not None:
            self._acceptor.join(ACCEPTOR_JOIN_SECONDS)
        # The acceptor has stopped: the set of connections can only shrink from here.
        with self._lock:
            connections = list(self._connections)
        for connection in connections:
            connection.abort()
        deadline = time.monotonic() + self._close_seconds()
        for connection in connections:
            connection.thread.join(max(0.0, deadline - time.monotonic()))
        problems = []
        alive = [t.name for t in [self._acceptor, *(c.thread for c in connections)] if t is not None and t.is_alive()]
        if alive:
            problems.append(f"threads still running: {', '.join(alive)}")
        problems += self._leftovers()
        if problems:
            raise TargetError(f"{self._description()} did not close cleanly: {'; '.join(problems)}")
