"""The loopback relay against the real Docker engine: a PostgreSQL server listening on 127.0.0.1
inside a container that has no network, reached from this process with psycopg through the relay.

One container for the module (made in about a second); every test leaves no relay process in it.
"""

from __future__ import annotations

import contextlib
import hashlib
import ipaddress
import random
import socket
import threading
import time
import traceback
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import docker.errors
import psycopg
import pytest
import sqlalchemy
from docker.models.containers import Container

import docker
from tests.integration.containers import sleeping_container
from verification.engines.mssql.target import MssqlTarget
from verification.targets.docker import run_in_container
from verification.targets.relay import Relay

IMAGE = "restoreproof/postgres:15"
SLIM = "debian:bookworm-slim"
START_SERVER = ('initdb -D /tmp/d -A trust >/tmp/initdb.log '
                '&& pg_ctl -D /tmp/d -o "-c listen_addresses=127.0.0.1" -l /tmp/l -w start')


def labelled(client: docker.DockerClient, image: str, name: str) -> Container:
    """A container from `image`, no network, labelled for `restoreproof reap`; removed by the caller."""
    return sleeping_container(client, image, "relay-test", name)


@pytest.fixture(scope="module")
def server(engine: docker.DockerClient) -> Iterator[Container]:
    container = labelled(engine, IMAGE, "pg")
    try:
        started = run_in_container(engine, container, ["bash", "-c", START_SERVER], timeout=60, user="postgres")
        assert started.ok, started.output
        yield container
    finally:
        container.remove(force=True)


def connect(relay: Relay) -> psycopg.Connection[tuple[object, ...]]:
    return psycopg.connect(host=relay.host, port=relay.port, user="postgres", dbname="postgres", connect_timeout=10)


def relay_processes(container: Container) -> list[str]:
    """Processes in the container that are neither its PID 1 nor PostgreSQL's."""
    rows = container.top(ps_args="-eo pid,stat,args")["Processes"]
    return [" ".join(row) for row in rows
            if not row[-1].startswith(("sleep infinity", "postgres", "/usr/lib/postgresql"))]


def client_backends(engine: docker.DockerClient, container: Container) -> int:
    result = run_in_container(engine, container, ["psql", "-h", "127.0.0.1", "-Atc",
                                                  "select count(*) - 1 from pg_stat_activity "
                                                  "where backend_type = 'client backend'"],
                              timeout=30, user="postgres")
    assert result.ok, result.output
    return int(result.stdout)


def relay_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("restoreproof-relay")]


def test_queries_and_large_binary_results_pass_intact(engine: docker.DockerClient, server: Container) -> None:
    with Relay(engine, server, 5432) as relay, connect(relay) as conn:
        # The server sees a loopback client: the connection was made inside the container.
        assert conn.execute("select inet_client_addr()::text, current_setting('port')").fetchone() == \
            ("127.0.0.1/32", "5432")
        rows = conn.execute("select repeat(md5(g::text), 1000) from generate_series(1, 2000) g order by g").fetchall()
        assert [row[0] for row in rows] == [hashlib.md5(str(g).encode()).hexdigest() * 1000 for g in range(1, 2001)]
        # Every byte value, 2 MiB each way, in binary: nothing is read as text or as a frame header.
        blob = random.Random(12).randbytes(2 << 20) + bytes(range(256))
        row = conn.cursor(binary=True).execute("select %b::bytea, md5(%b::bytea)", [blob, blob]).fetchone()
        assert row == (blob, hashlib.md5(blob).hexdigest())
    assert relay_threads() == [] and relay_processes(server) == []


def test_eight_connections_at_once_and_a_pool(engine: docker.DockerClient, server: Container) -> None:
    with Relay(engine, server, 5432) as relay:
        open_together: list[int] = []
        barrier = threading.Barrier(8, timeout=30, action=lambda: open_together.append(relay.open_connections))

        def work(number: int) -> tuple[int, str]:
            with connect(relay) as conn:
                barrier.wait()   # all eight are open here
                value = conn.execute("select md5(%s)", [f"connection {number}" * 1000]).fetchone()
                return conn.info.backend_pid, str(value[0]) if value else ""

        with ThreadPoolExecutor(8) as pool:
            results = list(pool.map(work, range(8)))
        assert open_together == [8]
        assert len({pid for pid, _ in results}) == 8
        assert [value for _, value in results] == \
            [hashlib.md5((f"connection {n}" * 1000).encode()).hexdigest() for n in range(8)]

        # A SQLAlchemy pool, as the data checks use: 16 threads over 4 pooled connections (+2 overflow).
        pooled = sqlalchemy.create_engine(f"postgresql+psycopg://postgres@{relay.host}:{relay.port}/postgres",
                                          pool_size=4, max_overflow=2, pool_timeout=30)
        try:
            def query(number: int) -> int:
                with pooled.connect() as conn:
                    return int(conn.execute(sqlalchemy.text("select :n * 2 from pg_sleep(0.02)"), {"n": number})
                               .scalar_one())

            with ThreadPoolExecutor(16) as pool:
                assert list(pool.map(query, range(64))) == [n * 2 for n in range(64)]
        finally:
            pooled.dispose()
    assert relay_threads() == [] and relay_processes(server) == []


def test_the_container_still_has_no_way_out(engine: docker.DockerClient, server: Container) -> None:
    server.reload()
    assert server.attrs["HostConfig"]["NetworkMode"] == "none"
    assert list(server.attrs["NetworkSettings"]["Networks"]) == ["none"]
    bridge = engine.networks.get("bridge").attrs["IPAM"]["Config"][0]
    gateway = bridge.get("Gateway") or str(next(ipaddress.ip_network(bridge["Subnet"]).hosts()))
    # A host service on every address: what an --internal network would leave reachable.
    with socket.create_server(("0.0.0.0", 0)) as host_service, Relay(engine, server, 5432) as relay:
        port = host_service.getsockname()[1]
        socket.create_connection((gateway, port), timeout=5).close()   # from the host it answers
        probe = ('ls /sys/class/net; for address in "$@"; do '
                 '(exec 3<>"/dev/tcp/${address%:*}/${address#*:}") && echo "reached $address"; done; true')
        result = run_in_container(engine, server, ["bash", "-c", probe, "probe", f"{gateway}:{port}",
                                                   f"127.0.0.1:{relay.port}"], timeout=30)
    assert result.stdout.split() == ["lo"]   # no interface but loopback
    assert "reached" not in result.stdout
    assert f"/dev/tcp/{gateway}/{port}: Network is unreachable" in result.stderr
    # The relay's port is the host's loopback, not the container's.
    assert f"/dev/tcp/127.0.0.1/{relay.port}: Connection refused" in result.stderr


def test_nothing_listening_inside_closes_the_client_promptly(engine: docker.DockerClient, server: Container,
                                                             caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level("WARNING", logger="verification.targets.relay"), Relay(engine, server, 5433) as relay:
        started = time.monotonic()
        with socket.create_connection(relay.address, timeout=10) as raw:
            raw.settimeout(10)
            with contextlib.suppress(ConnectionResetError):   # a reset is closed too
                assert raw.recv(1) == b""
        assert time.monotonic() - started < 3
        started = time.monotonic()
        with pytest.raises(psycopg.OperationalError, match="server closed the connection unexpectedly"):
            connect(relay)
        assert time.monotonic() - started < 3
    assert "nothing accepted the connection at 127.0.0.1:5433 inside the container" in caplog.text
    assert relay_threads() == [] and relay_processes(server) == []


def test_a_server_that_speaks_first_and_closes(engine: docker.DockerClient, server: Container) -> None:
    """Its greeting may come with the engine's 101 answer; its close must reach the client."""
    listen = ('use IO::Socket::INET; my $s = IO::Socket::INET->new(LocalAddr => "127.0.0.1", LocalPort => 7001, '
              'Listen => 16, ReuseAddr => 1) or die; $| = 1; while (my $c = $s->accept) { print $c "220 hello\\r\\n"; '
              'close $c }')
    server.exec_run(["bash", "-c", 'echo $$ >/tmp/greeter.pid; exec perl -e "$1"', "greeter", listen], detach=True)
    time.sleep(0.3)
    try:
        with Relay(engine, server, 7001) as relay:
            for _ in range(10):
                started = time.monotonic()
                with socket.create_connection(relay.address, timeout=10) as raw:
                    raw.settimeout(10)
                    data = b""
                    while chunk := raw.recv(100):
                        data += chunk
                assert data == b"220 hello\r\n"
                assert time.monotonic() - started < 3   # a tick after the server's close, not a hang
        assert relay_threads() == []
        assert [p for p in relay_processes(server) if "IO::Socket::INET" not in p] == []
    finally:
        run_in_container(engine, server, ["bash", "-c", "kill $(cat /tmp/greeter.pid)"], timeout=30)


def test_close_ends_every_connection_thread_and_relay_process(engine: docker.DockerClient, server: Container) -> None:
    relay = Relay(engine, server, 5432).start()
    clients = [connect(relay) for _ in range(3)]
    try:
        assert [c.execute("select 1").fetchone() for c in clients] == [(1,)] * 3
        processes = relay_processes(server)
        assert len(processes) == 9, processes   # bash and its two cats per connection
        assert sum("/dev/tcp/127.0.0.1/$1" in p for p in processes) == 3
        assert client_backends(engine, server) == 3
        started = time.monotonic()
        relay.close()
        assert time.monotonic() - started < 5
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(relay.address, timeout=5)
        assert relay_threads() == []
        assert relay_processes(server) == []          # no process, no zombie
        assert client_backends(engine, server) == 0   # and the server's sessions ended
        for client in clients:
            with pytest.raises(psycopg.OperationalError):
                client.execute("select 1")
    finally:
        for client in clients:
            client.close()
        relay.close()


def test_the_sql_server_target_url_goes_through_the_relay_and_its_errors_hold_no_password(engine: docker.DockerClient) -> None:
    """No SQL Server image here: a Debian container (bash and cat, nothing on 1433) stands in, which
    also shows the relay needs nothing else in the image. The target's close() removes it."""
    container = labelled(engine, SLIM, "mssql")
    password = "Ab1#x%y+z=W_q-.eF5gH6jK7"
    target = MssqlTarget(engine, container, None, SLIM, password)
    try:
        url = target.data_url("master")
        assert str(url) == f"mssql+pymssql://sa:***@127.0.0.1:{url.port}/master"
        pooled = sqlalchemy.create_engine(url)
        started = time.monotonic()
        with pytest.raises(sqlalchemy.exc.OperationalError) as caught:
            pooled.connect()
        assert time.monotonic() - started < 5
        text = "".join(traceback.format_exception(caught.value)) + repr(caught.value) + repr(caught.value.orig)
        assert "Unexpected EOF from the server (127.0.0.1)" in text
        assert password not in text and "Ab1%23x%25y" not in text
        pooled.dispose()
    finally:
        target.close()
    with pytest.raises(docker.errors.NotFound):
        engine.containers.get(container.id)
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", url.port), timeout=5)
    assert relay_threads() == []
