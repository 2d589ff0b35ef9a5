"""One way out for a container that has no network: to exactly one TCP endpoint, and nothing else.

Why: pgBackRest in a restore target (or a demo source) must reach an S3 repository itself, and the
container must keep `network_mode="none"`: a Docker network, even an `--internal` one, reaches every
host service through the bridge's gateway (see relay.py), so it is a way out, not a way to one place.

How, for one endpoint (host:port, fixed when the link is made: the container cannot choose):

- Host side (`SocketBridge`): a Unix socket in a folder the container sees (the target's exchange
  folder). For each connection accepted there, restoreproof's own process opens a TCP connection to
  the endpoint and copies bytes both ways, passing half-closes on. That is the only connection it
  ever opens: whatever a process in the container sends, it reaches that endpoint or nothing.
- Container side (`Forwarder`): socat listens on 127.0.0.1:<endpoint port> in the container and
  connects each connection to that socket. It moves bytes only: TLS runs end to end between the
  client in the container and the endpoint.
- Names: the endpoint's host name (and any other, e.g. `bucket.host` for virtual-host style S3)
  resolve to 127.0.0.1 in the container (/etc/hosts), so a TLS client there connects to the name it
  verifies the certificate against. An endpoint given as a loopback address needs no name (the
  forwarder listens on that address). Any other IP address cannot be served: the client would
  connect to that address, which a container without a network cannot have (TargetError).

Nothing here logs a connection's bytes: the log says which connection, what happened and how many
bytes. The host threads are named `restoreproof-egress-*`; the forwarder is one `docker exec` in a
labelled container (removed with it by `restoreproof reap`), and `close()` stops it and checks with
`exec_inspect` that it ended.
"""

from __future__ import annotations

import contextlib
import ipaddress
import logging
import os
import secrets
import socket
import threading
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from urllib.parse import urlsplit

import docker.errors
import requests
from docker.models.containers import Container

import docker
from verification.errors import TargetError
from verification.targets.docker import run_in_container
from verification.targets.listening import Listening, shutdown
from verification.targets.polling import poll_until

log = logging.getLogger(__name__)

CHUNK = 256 * 1024
LOOPBACK = "127.0.0.1"
DEFAULT_PORTS = {"https": 443, "http": 80}
# Run as `bash -c FORWARDER_SCRIPT forwarder PIDFILE LISTEN SOCKET LOGFILE` (LISTEN: socat's listening
# address). Its PID is written first (bash's, which socat then takes over with exec), so close() can
# stop exactly this process.
FORWARDER_SCRIPT = """command -v socat >/dev/null || exit 127
echo $$ > "$1"
exec socat "$2",reuseaddr,fork UNIX-CONNECT:"$3" 2>>"$4"
"""
NO_SOCAT = 127
# Run as `bash -c LISTENING_SCRIPT listening PIDFILE ADDRESS:PORT TABLE` (as /proc/net/tcp or tcp6,
# TABLE, write it): exits 0 when that forwarder itself (not another process on the same port) holds a
# socket listening there.
LISTENING_SCRIPT = """pid=$(cat "$1" 2>/dev/null) || exit 1
while read -r _ local remote state _ _ _ _ _ inode _; do
  [ "$local" = "$2" ] && [ "${remote#*:}" = 0000 ] && [ "$state" = 0A ] || continue
  for fd in /proc/"$pid"/fd/*; do [ "$(readlink "$fd")" = "socket:[$inode]" ] && exit 0; done
done < "$3"
exit 1
"""
# The container's loopback has an IPv6 address (/proc/net/if_inet6 lists ::1): then a name that
# resolves to ::1 first (localhost) needs a forwarder there too.
HAS_IPV6_LOOPBACK = ["grep", "-qs", "^0*1 ", "/proc/net/if_inet6"]
IPV6_LOOPBACK = "::1"


@dataclass(frozen=True)
class Endpoint:
    """Where the one way out leads: `host` (a name, or a loopback address) and `port`, plus more
    names the container must resolve to it (a virtual-host style bucket's `bucket.host`)."""

    host: str
    port: int
    names: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not 0 < self.port < 65536:
            raise TargetError(f"not a TCP port for the endpoint {self.host}: {self.port}")
        if not self.host:
            raise TargetError("the endpoint has no host")
        address = _ip(self.host)
        if address is not None and not (address.version == 4 and address.is_loopback):
            raise TargetError(f"the endpoint {self.host}:{self.port} is an IP address a container without a network "
                              "cannot be given: name it by a DNS name (its certificate's), or by 127.0.0.1 when it "
                              "listens on this host")
        for name in self.names:
            if _ip(name) is not None or not name or any(c.isspace() for c in name):
                raise TargetError(f"not a host name for the endpoint {self.host}: {name!r}")

    @classmethod
    def from_url(cls, url: str, *names: str) -> Endpoint:
        """https://host[:port] -> Endpoint (443 for https, 80 for http when no port is given)."""
        try:
            parts = urlsplit(url)
            port = parts.port or DEFAULT_PORTS.get(parts.scheme)
        except ValueError as exc:
            raise TargetError(f"not an endpoint URL: {url!r}: {exc}") from exc
        if not parts.hostname or port is None:
            raise TargetError(f"not an endpoint URL (scheme://host[:port]): {url!r}")
        return cls(parts.hostname, port, tuple(names))

    @property
    def listen_address(self) -> str:
        """Where the forwarder listens in the container: the endpoint's own loopback address, or 127.0.0.1."""
        return self.host if _ip(self.host) is not None else LOOPBACK

    @property
    def host_names(self) -> tuple[str, ...]:
        """The names the container resolves to the forwarder's address."""
        own = () if _ip(self.host) is not None else (self.host,)
        return tuple(dict.fromkeys((*own, *self.names)))


def _ip(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None


class _Connection:
    """One connection from the container and the one to the endpoint: one thread per direction."""

    def __init__(self, bridge: SocketBridge, number: int, inner: socket.socket) -> None:
        self.bridge = bridge
        self.number = number
        self.inner = inner
        self.outer: socket.socket | None = None
        self.label = f"egress {bridge.path.name}->{bridge.endpoint.host}:{bridge.endpoint.port} #{number}"
        self.bytes_up = 0    # container -> endpoint
        self.bytes_down = 0  # endpoint -> container
        self._lock = threading.Lock()
        self._aborted = False
        self.thread = threading.Thread(target=self._run, daemon=True,
                                       name=f"restoreproof-egress-{bridge.endpoint.port}-{number}")

    def abort(self) -> None:
        """Wake both directions (their reads return); the owner thread closes the sockets."""
        with self._lock:
            self._aborted = True
            outer = self.outer
        shutdown(self.inner, socket.SHUT_RDWR)
        shutdown(outer, socket.SHUT_RDWR)

    def _run(self) -> None:
        upstream: threading.Thread | None = None
        try:
            endpoint = self.bridge.endpoint
            try:
                outer = socket.create_connection((endpoint.host, endpoint.port), timeout=self.bridge.connect_timeout)
            except OSError as exc:
                log.warning("%s: cannot connect to the endpoint: %s", self.label, exc)
                return
            outer.settimeout(None)
            with self._lock:
                self.outer = outer
                aborted = self._aborted
            if aborted:  # close() came while connecting
                return
            self.inner.settimeout(None)
            upstream = threading.Thread(target=self._pump, args=(self.inner, outer, "up"), daemon=True,
                                        name=f"{self.thread.name}-up")
            upstream.start()
            self._pump(outer, self.inner, "down")
            upstream.join()
        except Exception:  # a thread must not die silently; its connection is closed below
            log.exception("%s: egress failed", self.label)
        finally:
            self.abort()
            if upstream is not None:
                upstream.join()
            for sock in (self.outer, self.inner):
                if sock is not None:
                    with contextlib.suppress(OSError):
                        sock.close()
            log.debug("%s: closed (%d bytes up, %d bytes down)", self.label, self.bytes_up, self.bytes_down)
            self.bridge._forget(self)

    def _pump(self, source: socket.socket, sink: socket.socket, direction: str) -> None:
        buffer = bytearray(CHUNK)
        view = memoryview(buffer)
        try:
            while True:
                received = source.recv_into(buffer)
                if received == 0:
                    # This side is done sending: pass the half-close on, the other direction goes on.
                    shutdown(sink, socket.SHUT_WR)
                    return
                sink.sendall(view[:received])
                if direction == "up":
                    self.bytes_up += received
                else:
                    self.bytes_down += received
        except OSError as exc:
            log.debug("%s: %s ended: %s", self.label, direction, type(exc).__name__)
            self.abort()


class SocketBridge(Listening[_Connection]):
    """A Unix socket at `path` whose every connection is joined to a new TCP connection to `endpoint`."""

    family = socket.AF_UNIX
    kind = "bridge"

    def __init__(self, path: Path, endpoint: Endpoint, *, connect_timeout: float = 10.0) -> None:
        super().__init__()
        self.path = path
        self.endpoint = endpoint
        self.connect_timeout = connect_timeout

    def _bind(self, listener: socket.socket) -> None:
        listener.bind(str(self.path))
        # Whatever user the container's client runs as may connect; the folder is what guards it
        # (private to this user on the host, mounted into one container).
        os.chmod(self.path, 0o666)

    def _listen_failed(self, exc: OSError) -> TargetError:
        self._listener_closed()
        return TargetError(f"cannot listen on {self.path} for a way to {self.endpoint.host}:{self.endpoint.port}: "
                           f"{exc}")

    def _acceptor_name(self) -> str:
        return f"restoreproof-egress-{self.endpoint.port}-accept"

    def _connection(self, number: int, sock: socket.socket) -> _Connection:
        return _Connection(self, number, sock)

    def _accept_failed(self, exc: OSError) -> None:
        log.warning("egress %s: accept failed: %s", self.path.name, exc)

    def _listener_closed(self) -> None:
        with contextlib.suppress(OSError):
            self.path.unlink()

    def _close_seconds(self) -> float:
        return self.connect_timeout + 5.0

    def _description(self) -> str:
        return f"the way from {self.path} to {self.endpoint.host}:{self.endpoint.port}"


class Forwarder:
    """socat in `container`, listening on the endpoint's address (or `address`) and port there,
    connecting each connection to the Unix socket `socket_inside` (as the container sees it)."""

    def __init__(self, client: docker.DockerClient, container: Container, endpoint: Endpoint, socket_inside: str,
                 *, user: str | None = None, address: str | None = None) -> None:
        self.client = client
        self.container = container
        self.endpoint = endpoint
        self.socket_inside = socket_inside
        self.address = address or endpoint.listen_address
        # Any user may bind a port from 1024 up; below it, root (or Docker's unprivileged-port sysctl).
        self.user = user or ("nobody" if endpoint.port >= 1024 else "root")
        # Its own files: another forwarder in the same container never stands in for this one.
        own = f"/tmp/restoreproof-egress-{endpoint.port}-{secrets.token_hex(4)}"
        self.pid_file, self.log_file = f"{own}.pid", f"{own}.log"
        self.exec_id: str | None = None
        self.name = container.name or (container.id or "")[:12]

    def start(self, timeout: float = 30.0) -> Forwarder:
        api = self.client.api
        address = self.address
        six = _ip(address) is not None and ":" in address
        command = ["bash", "-c", FORWARDER_SCRIPT, "forwarder", self.pid_file,
                   f"{'TCP6' if six else 'TCP'}-LISTEN:{self.endpoint.port},bind={f'[{address}]' if six else address}",
                   self.socket_inside, self.log_file]
        try:
            self.exec_id = api.exec_create(self.container.id, command, user=self.user, stdin=False, stdout=False,
                                           stderr=False)["Id"]
            api.exec_start(self.exec_id, detach=True)
        except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
            raise TargetError(f"cannot start the forwarder in container {self.name}: {exc}") from exc
        listening = f"{_proc_net_address(address)}:{self.endpoint.port:04X}"
        table = "/proc/net/tcp6" if six else "/proc/net/tcp"

        def ready() -> bool:
            state = api.exec_inspect(self.exec_id)
            if not state.get("Running"):
                raise TargetError(self._died(state.get("ExitCode")))
            probe = run_in_container(self.client, self.container,
                                     ["bash", "-c", LISTENING_SCRIPT, "listening", self.pid_file, listening, table],
                                     timeout=30, user=self.user)
            return probe.ok

        try:
            listens = poll_until(ready, timeout, 0.05)
        except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
            raise TargetError(f"the forwarder in container {self.name} could not be watched: {exc}") from exc
        if not listens:
            raise TargetError(f"the forwarder in container {self.name} did not listen on {address}:"
                              f"{self.endpoint.port} within {timeout:.0f} s")
        return self

    def _died(self, code: int | None) -> str:
        if code == NO_SOCAT:
            return (f"container {self.name} has no socat, the forwarder to its endpoint: rebuild the image "
                    "(make images, or verification/images/build.sh)")
        said = run_in_container(self.client, self.container, ["cat", self.log_file], timeout=30, user=self.user)
        return (f"the forwarder in container {self.name} exited {code} before listening on "
                f"{self.address}:{self.endpoint.port}: {said.stdout.strip()[-400:]}")

    @property
    def running(self) -> bool:
        if self.exec_id is None:
            return False
        return bool(self.client.api.exec_inspect(self.exec_id).get("Running"))

    def close(self, timeout: float = 10.0) -> None:
        """Stop the forwarder (TERM, then KILL) and check that it ended; TargetError when it did not."""
        if self.exec_id is None:
            return
        try:
            for signal_name in ("TERM", "KILL"):
                if not self.running:
                    return
                run_in_container(self.client, self.container,
                                 ["bash", "-c", 'kill -s "$1" "$(cat "$2")"', "stop", signal_name, self.pid_file],
                                 timeout=30, user=self.user)
                if poll_until(lambda: not self.running, timeout / 2, 0.05):
                    return
        except (docker.errors.DockerException, requests.exceptions.RequestException, TargetError) as exc:
            # The container is gone (or going): so is the forwarder.
            log.debug("forwarder in %s: %s", self.name, exc)
            return
        raise TargetError(f"the forwarder in container {self.name} still runs after TERM and KILL")


def _proc_net_address(address: str) -> str:
    """An address as /proc/net/tcp and tcp6 show it: each 32-bit word little-endian, in hex
    (127.0.0.1 -> 0100007F; ::1 -> 00000000000000000000000001000000)."""
    packed = ipaddress.ip_address(address).packed
    return "".join(bytes(reversed(packed[i:i + 4])).hex().upper() for i in range(0, len(packed), 4))


class EgressLink:
    """The way from `container` to `endpoint`: the bridge on this host, the names and the forwarder in
    the container. `folder` is (as the container sees it, as this host sees it): the exchange folder.

    A named endpoint in a container whose loopback has IPv6 gets a second forwarder on [::1]: a name
    like localhost resolves to ::1 first there, and clients such as pgBackRest try only the first
    address they are given.

    with EgressLink(client, container, Endpoint.from_url(url), folder):
        ...  # in the container, https://<endpoint host>:<port> reaches the endpoint, and nothing else does
    """

    def __init__(self, client: docker.DockerClient, container: Container, endpoint: Endpoint,
                 folder: tuple[str, str], *, connect_timeout: float = 10.0) -> None:
        self.client = client
        self.container = container
        self.endpoint = endpoint
        name = f"egress-{endpoint.port}.sock"
        self.socket_inside = f"{folder[0]}/{name}"
        self.bridge = SocketBridge(Path(folder[1]) / name, endpoint, connect_timeout=connect_timeout)
        self.forwarder = Forwarder(client, container, endpoint, self.socket_inside)
        self.forwarders = [self.forwarder]

    def start(self, timeout: float = 30.0) -> EgressLink:
        try:
            self.bridge.start()
            self._add_names()
            self.forwarder.start(timeout)
            if self.endpoint.host_names and self._has_ipv6_loopback():
                six = Forwarder(self.client, self.container, self.endpoint, self.socket_inside, address=IPV6_LOOPBACK)
                self.forwarders.append(six)
                six.start(timeout)
        except BaseException:
            with contextlib.suppress(TargetError):
                self.close()
            raise
        return self

    def _has_ipv6_loopback(self) -> bool:
        return run_in_container(self.client, self.container, HAS_IPV6_LOOPBACK, timeout=30).ok

    def _add_names(self) -> None:
        names = self.endpoint.host_names
        if not names:
            return
        line = f"{self.endpoint.listen_address} {' '.join(names)}\n"
        added = run_in_container(self.client, self.container, ["bash", "-c", 'printf %s "$1" >> /etc/hosts', "hosts",
                                                               line], timeout=30, user="root")
        if not added.ok:
            raise TargetError(f"cannot name {', '.join(names)} in container {self.forwarder.name}: "
                              f"{added.output.strip()[-300:]}")

    def close(self) -> None:
        """The bridge first (every connection ends, so socat's children exit and are reaped by it), then
        the forwarders; raises TargetError naming what outlived the close."""
        problems = []
        parts: list[SocketBridge | Forwarder] = [self.bridge, *self.forwarders]
        for part in parts:
            try:
                part.close()
            except TargetError as exc:
                problems.append(str(exc))
        if problems:
            raise TargetError("; ".join(problems))

    def __enter__(self) -> EgressLink:
        return self.start()

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.close()
