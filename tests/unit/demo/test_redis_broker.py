"""The Celery broker for the tests and benches: Debian's real redis-server, on a free port, nothing left."""

from __future__ import annotations

import shutil
import socket
from pathlib import Path

import pytest

from verification.demo.processes import ProcessError
from verification.demo.redis_broker import RedisBroker

pytestmark = pytest.mark.skipif(shutil.which("redis-server") is None and not Path("/usr/bin/redis-server").exists(),
                                reason="redis-server is not installed (make setup installs Debian's redis-server)")


def test_serves_on_loopback_and_leaves_nothing() -> None:
    import redis

    with RedisBroker() as broker:
        assert broker.url.startswith("redis://127.0.0.1:") and broker.url.endswith("/0")
        client = redis.Redis.from_url(broker.url)
        client.set("queue", "a message")
        assert client.get("queue") == b"a message"
        assert client.config_get("save") == {"save": ""}  # nothing kept on disk
        client.close()
        folder, process = broker.folder, broker.process
        assert folder is not None and process is not None and process.running()
    assert not folder.exists()
    assert not process.running()


def test_a_port_it_cannot_bind_fails_naming_the_server_and_leaves_nothing() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        broker = RedisBroker(port=taken.getsockname()[1])
        with pytest.raises(ProcessError, match="redis exited with code"):
            broker.start(timeout=20)
    assert broker.folder is None and broker.process is None
