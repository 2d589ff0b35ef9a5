"""The egress link against the real Docker engine: a container with no network reaches exactly one
endpoint on this host (a TCP server, the local S3 endpoint over TLS) and nothing else; nothing of
the link outlives its close, or a start that failed."""

from __future__ import annotations

import hashlib
import ipaddress
import random
import secrets
import shutil
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import docker.errors
import pytest
from docker.models.containers import Container

import docker
from tests.integration.containers import sleeping_container
from tests.unit.targets.test_egress import Upstream
from verification.config import DockerSettings
from verification.demo.s3_endpoint import LocalS3Endpoint
from verification.errors import TargetError
from verification.targets import egress as egress_module
from verification.targets.docker import DockerTargetProvider, run_in_container
from verification.targets.egress import EgressLink, Endpoint
from verification.targets.exchange import EXCHANGE_PATH, ExchangeFolder, make_exchange
from verification.targets.labels import RUN_LABEL

IMAGE = "restoreproof/postgres:15"
SLIM = "debian:bookworm-slim"


@pytest.fixture
def exchange(tmp_path: Path) -> Iterator[ExchangeFolder]:
    folder = make_exchange(tmp_path / "state", "egress-test", "egress")
    yield folder
    folder.remove()


def container_with(engine: docker.DockerClient, image: str, exchange: ExchangeFolder, **options: object) -> Container:
    volumes = {str(exchange.shared): {"bind": EXCHANGE_PATH, "mode": "rw"}}
    return sleeping_container(engine, image, "egress-test", options={"volumes": volumes, **options})


@pytest.fixture
def box(engine: docker.DockerClient, exchange: ExchangeFolder) -> Iterator[Container]:
    container = container_with(engine, IMAGE, exchange)
    yield container
    container.remove(force=True)


def sh(engine: docker.DockerClient, container: Container, script: str, *args: str, user: str = "postgres") -> str:
    result = run_in_container(engine, container, ["bash", "-c", script, "sh", *args], timeout=120, user=user)
    assert result.ok, result.output
    return result.stdout


def socat_processes(container: Container) -> list[str]:
    rows = container.top(ps_args="-eo pid,args")["Processes"]
    return [" ".join(row) for row in rows if "socat" in row[-1]]


def egress_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("restoreproof-egress")]


def test_bytes_go_through_both_ways(engine: docker.DockerClient, box: Container, exchange: ExchangeFolder) -> None:
    reply = random.Random(5).randbytes(3 << 20)
    upstream = Upstream(reply)
    try:
        endpoint = Endpoint("127.0.0.1", upstream.port)
        with EgressLink(engine, box, endpoint, (EXCHANGE_PATH, str(exchange.shared))) as link:
            # 4 MB up (random), the server's digest of it and 3 MB down; socat as the client half-closes.
            out = sh(engine, box, 'head -c 4000000 /dev/urandom > /tmp/up; sha256sum < /tmp/up; '
                                  'socat -t 60 - TCP:127.0.0.1:"$1" < /tmp/up > /tmp/down; '
                                  'head -c 64 /tmp/down; echo; tail -c +65 /tmp/down | sha256sum',
                     str(upstream.port))
            sent, echoed, received = (line.split()[0] for line in out.splitlines())
            assert echoed == sent
            assert received == hashlib.sha256(reply).hexdigest()
            # The connection was made inside the container, to its own loopback.
            assert link.bridge.accepted == 1 and upstream.connections == 1
            assert link.forwarder.running
            assert len(socat_processes(box)) == 1
        assert egress_threads() == [] and socat_processes(box) == []
        assert not link.forwarder.running
        assert not (exchange.shared / f"egress-{upstream.port}.sock").exists()
    finally:
        upstream.close()


def test_tls_runs_end_to_end_and_the_certificate_names_are_checked(engine: docker.DockerClient, box: Container,
                                                                   exchange: ExchangeFolder) -> None:
    with LocalS3Endpoint() as s3:
        assert s3.ca_file is not None
        shutil.copy(s3.ca_file, exchange.shared / "ca.pem")
        verify = ('openssl s_client -brief -connect "$1" -CAfile /run/restoreproof/ca.pem -verify_return_error '
                  '"$2" "$3" </dev/null 2>&1; echo "exit $?"')
        # By address: the certificate covers 127.0.0.1.
        with EgressLink(engine, box, Endpoint("127.0.0.1", s3.port), (EXCHANGE_PATH, str(exchange.shared))):
            out = sh(engine, box, verify, f"127.0.0.1:{s3.port}", "-verify_ip", "127.0.0.1")
            assert "Verification: OK" in out and out.rstrip().endswith("exit 0"), out
            # The same bytes under a name the certificate does not hold: refused, so the check is real.
            out = sh(engine, box, verify, f"127.0.0.1:{s3.port}", "-verify_hostname", "s3.example.com")
            assert "hostname mismatch" in out and not out.rstrip().endswith("exit 0"), out
        # By name: localhost and a virtual-host style bucket name resolve to the forwarder inside.
        endpoint = Endpoint("localhost", s3.port, ("restoreproof-demo.localhost",))
        with EgressLink(engine, box, endpoint, (EXCHANGE_PATH, str(exchange.shared))):
            assert sh(engine, box, "getent hosts restoreproof-demo.localhost").split()[0] == "127.0.0.1"
            out = sh(engine, box, verify, f"restoreproof-demo.localhost:{s3.port}", "-verify_hostname", "localhost")
            assert "Verification: OK" in out and out.rstrip().endswith("exit 0"), out
    assert egress_threads() == [] and socat_processes(box) == []


def test_localhost_in_a_container_with_ipv6_loopback(engine: docker.DockerClient, exchange: ExchangeFolder) -> None:
    """There localhost resolves to ::1 first, and pgBackRest tries only the first address: a second
    forwarder listens on [::1]."""
    container = container_with(engine, IMAGE, exchange, sysctls={"net.ipv6.conf.lo.disable_ipv6": "0"})
    try:
        assert sh(engine, container, "getent ahosts localhost | head -1").split()[0] == "::1"
        with LocalS3Endpoint() as s3:
            assert s3.ca_file is not None
            shutil.copy(s3.ca_file, exchange.shared / "ca.pem")
            with EgressLink(engine, container, Endpoint("localhost", s3.port),
                            (EXCHANGE_PATH, str(exchange.shared))) as link:
                assert [f.address for f in link.forwarders] == ["127.0.0.1", "::1"]
                for address in ("localhost", "[::1]", "127.0.0.1"):
                    out = sh(engine, container, 'openssl s_client -brief -connect "$1" -CAfile /run/restoreproof/ca.pem '
                                                '-verify_return_error -verify_hostname localhost </dev/null 2>&1; '
                                                'echo "exit $?"', f"{address}:{s3.port}")
                    assert "Verification: OK" in out and out.rstrip().endswith("exit 0"), (address, out)
                assert link.bridge.accepted == 3
            assert socat_processes(container) == [] and egress_threads() == []
    finally:
        container.remove(force=True)


def test_the_container_reaches_nothing_else(engine: docker.DockerClient, box: Container,
                                            exchange: ExchangeFolder) -> None:
    upstream = Upstream(b"")
    bridge = engine.networks.get("bridge").attrs["IPAM"]["Config"][0]
    gateway = bridge.get("Gateway") or str(next(ipaddress.ip_network(bridge["Subnet"]).hosts()))
    # Host services on every address and on loopback: what a Docker network would leave reachable.
    with socket.create_server(("0.0.0.0", 0)) as everywhere, socket.create_server(("127.0.0.1", 0)) as loopback:
        try:
            with EgressLink(engine, box, Endpoint("127.0.0.1", upstream.port),
                            (EXCHANGE_PATH, str(exchange.shared))) as link:
                targets = [f"{gateway}:{everywhere.getsockname()[1]}", f"127.0.0.1:{loopback.getsockname()[1]}",
                           f"{gateway}:{upstream.port}", f"127.0.0.2:{upstream.port}", "1.1.1.1:443"]
                probe = ('ls /sys/class/net; for address in "$@"; do '
                         '(timeout 5 bash -c \'exec 3<>"/dev/tcp/${0%:*}/${0#*:}"\' "$address") '
                         '&& echo "reached $address"; done; true')
                result = run_in_container(engine, box, ["bash", "-c", probe, "probe", *targets], timeout=60)
                assert result.stdout.split() == ["lo"]  # no interface but loopback
                assert "reached" not in result.stdout, result.output
                assert f"/dev/tcp/{gateway}/{everywhere.getsockname()[1]}: Network is unreachable" in result.stderr
                assert f"/dev/tcp/127.0.0.1/{loopback.getsockname()[1]}: Connection refused" in result.stderr
                # Only the endpoint's address and port lead anywhere: 127.0.0.2 is not where it listens.
                assert f"/dev/tcp/127.0.0.2/{upstream.port}: Connection refused" in result.stderr
                assert link.bridge.accepted == 0 and upstream.connections == 0
                # The way it has still works.
                sh(engine, box, 'echo hi | socat -t 10 - TCP:127.0.0.1:"$1"', str(upstream.port))
                assert link.bridge.accepted == 1 and upstream.connections == 1
        finally:
            upstream.close()
        everywhere.settimeout(0.2)
        with pytest.raises(TimeoutError):
            everywhere.accept()  # nothing from the container ever arrived


def test_close_with_connections_open_leaves_nothing(engine: docker.DockerClient, box: Container,
                                                    exchange: ExchangeFolder) -> None:
    upstream = Upstream(b"")  # answers only after a half-close that never comes
    try:
        link = EgressLink(engine, box, Endpoint("127.0.0.1", upstream.port),
                          (EXCHANGE_PATH, str(exchange.shared))).start()
        hung = engine.api.exec_create(box.id, ["socat", "-T", "300", "EXEC:sleep 300", f"TCP:127.0.0.1:{upstream.port}"],
                                      user="postgres")["Id"]
        engine.api.exec_start(hung, detach=True)
        for _ in range(200):
            if link.bridge.open_connections == 2 or upstream.connections:
                break
            threading.Event().wait(0.05)
        assert upstream.connections == 1
        link.close()
        for _ in range(200):  # the client's socat sees its connection end and exits
            if not engine.api.exec_inspect(hung)["Running"]:
                break
            threading.Event().wait(0.05)
        assert not engine.api.exec_inspect(hung)["Running"]
        assert egress_threads() == [] and socat_processes(box) == []
        link.close()  # twice is fine
    finally:
        upstream.close()


def test_an_image_without_socat_is_a_clear_error_and_leaves_nothing(engine: docker.DockerClient,
                                                                    exchange: ExchangeFolder) -> None:
    container = container_with(engine, SLIM, exchange)
    try:
        with pytest.raises(TargetError, match="has no socat, the forwarder to its endpoint: rebuild the image"):
            EgressLink(engine, container, Endpoint("127.0.0.1", 9), (EXCHANGE_PATH, str(exchange.shared))).start()
        assert egress_threads() == [] and list(exchange.shared.iterdir()) == []
    finally:
        container.remove(force=True)


def test_a_port_taken_inside_is_a_clear_error_and_the_first_link_still_works(
        engine: docker.DockerClient, box: Container, exchange: ExchangeFolder) -> None:
    upstream = Upstream(b"pong")
    try:
        endpoint = Endpoint("127.0.0.1", upstream.port)
        with EgressLink(engine, box, endpoint, (EXCHANGE_PATH, str(exchange.shared))) as first:
            other = tempfile_folder(exchange)
            with pytest.raises(TargetError, match=r"exited 1 before listening on 127.0.0.1:\d+: .*Address (already )?in use"):
                EgressLink(engine, box, endpoint, (EXCHANGE_PATH + "/other", str(other))).start()
            assert list(other.iterdir()) == []
            answer = sh(engine, box, 'printf ping | socat -t 10 - TCP:127.0.0.1:"$1"', str(upstream.port))
            assert answer.endswith("pong") and first.bridge.accepted == 1
        assert egress_threads() == [] and socat_processes(box) == []
    finally:
        upstream.close()


def tempfile_folder(exchange: ExchangeFolder) -> Path:
    folder = exchange.shared / "other"
    folder.mkdir(mode=0o777)
    folder.chmod(0o777)
    return folder


@pytest.fixture
def provider(tmp_path: Path) -> Iterator[tuple[DockerTargetProvider, Upstream]]:
    upstream = Upstream(b"pong")
    try:
        yield (DockerTargetProvider(DockerSettings(), IMAGE, tmp_path / "state",
                                    egress=Endpoint("127.0.0.1", upstream.port), mount_repository=False), upstream)
    finally:
        upstream.close()


def test_a_target_with_a_way_out_and_no_repository_mount(provider: tuple[DockerTargetProvider, Upstream],
                                                         engine: docker.DockerClient, tmp_path: Path) -> None:
    docker_provider, upstream = provider
    run = f"egress-test-{secrets.token_hex(3)}"
    target = docker_provider.provision(run, "db1", "s3://not-a-folder/")
    try:
        target.container.reload()
        mounts = {m["Destination"] for m in target.container.attrs["Mounts"]}
        assert mounts == {"/var/lib/restoreproof", EXCHANGE_PATH}   # no repository mount
        assert target.container.attrs["HostConfig"]["NetworkMode"] == "none"
        assert target.describe()["egress"] == f"127.0.0.1:{upstream.port}"
        result = target.run(["bash", "-c", 'printf ping | socat -t 10 - TCP:127.0.0.1:"$1"', "sh",
                             str(upstream.port)], timeout=60)
        assert result.ok and result.stdout.endswith("pong"), result.output
        # A probe (a second, short-lived target) only measures a start: no way out, no exchange.
        probe = docker_provider.provision(run, "db1", "s3://not-a-folder/", role="probe")
        assert probe.egress is None and probe.exchange is None
        probe.close()
    finally:
        exchange_root = Path(target.exchange[1]).parent if target.exchange else None
        target.close()
    assert egress_threads() == []
    assert exchange_root is not None and not exchange_root.exists()
    assert engine.containers.list(all=True, filters={"label": f"{RUN_LABEL}={run}"}) == []
    assert engine.volumes.list(filters={"label": f"{RUN_LABEL}={run}"}) == []


@pytest.mark.parametrize("fault", [TargetError("no way"), KeyboardInterrupt()], ids=["error", "interrupt"])
def test_a_way_out_that_fails_to_start_leaves_no_target(provider: tuple[DockerTargetProvider, Upstream],
                                                         engine: docker.DockerClient, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch, fault: BaseException) -> None:
    docker_provider, _ = provider

    def failing(self: egress_module.Forwarder, timeout: float = 30.0) -> egress_module.Forwarder:
        raise fault

    monkeypatch.setattr(egress_module.Forwarder, "start", failing)
    run = f"egress-test-{secrets.token_hex(3)}"
    with pytest.raises(type(fault)):
        docker_provider.provision(run, "db1", "s3://not-a-folder/")
    assert egress_threads() == []
    assert engine.containers.list(all=True, filters={"label": f"{RUN_LABEL}={run}"}) == []
    assert engine.volumes.list(filters={"label": f"{RUN_LABEL}={run}"}) == []
    assert list((tmp_path / "state" / "leftovers").glob("*.json")) == []   # the exchange folder went too
