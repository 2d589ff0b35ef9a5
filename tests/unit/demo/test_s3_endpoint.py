"""The local S3 endpoint: real moto server process, TLS trusted only through the CA it made, nothing left."""

from __future__ import annotations

import os
import signal
import ssl
import subprocess
import sys
import time
from pathlib import Path

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import SSLError

from verification.demo.s3_endpoint import LocalS3Endpoint
from verification.errors import SourceError


def _client(url: str, verify: str | bool) -> object:
    return boto3.client("s3", endpoint_url=url, verify=verify, aws_access_key_id="k", aws_secret_access_key="s",
                        region_name="us-east-1", config=Config(s3={"addressing_style": "path"}))


def test_serves_s3_over_tls_signed_by_its_own_ca() -> None:
    with LocalS3Endpoint() as s3:
        assert s3.url.startswith("https://127.0.0.1:")
        assert s3.ca_file is not None
        client = _client(s3.url, str(s3.ca_file))
        client.create_bucket(Bucket="restoreproof-test")  # type: ignore[attr-defined]
        client.put_object(Bucket="restoreproof-test", Key="a/b", Body=b"0123456789")  # type: ignore[attr-defined]
        got = client.get_object(Bucket="restoreproof-test", Key="a/b", Range="bytes=2-4")  # type: ignore[attr-defined]
        assert got["Body"].read() == b"234"
        # Trusted only through its CA: the system's trust store does not know it.
        with pytest.raises(SSLError):
            _client(s3.url, True).list_buckets()  # type: ignore[attr-defined]
        context = ssl.create_default_context(cafile=str(s3.ca_file))
        assert context.cert_store_stats()["x509_ca"] == 1
        folder, process = s3.folder, s3.process
    assert not folder.exists()
    assert process is not None and process.poll() is not None


def test_plain_http_when_asked() -> None:
    with LocalS3Endpoint(tls=False) as s3:
        assert s3.url.startswith("http://") and s3.ca_file is None
        assert _client(s3.url, False).list_buckets()["Buckets"] == []  # type: ignore[attr-defined]


def test_the_endpoint_dies_with_a_killed_parent(tmp_path: Path) -> None:
    script = ("import sys, time\nfrom pathlib import Path\nfrom verification.demo.s3_endpoint import LocalS3Endpoint\n"
              "s3 = LocalS3Endpoint(tls=False, folder=Path(sys.argv[1])).start()\nprint(s3.process.pid, flush=True)\ntime.sleep(120)\n")
    parent = subprocess.Popen([sys.executable, "-c", script, str(tmp_path / "endpoint")], stdout=subprocess.PIPE, text=True)
    assert parent.stdout is not None
    server_pid = int(parent.stdout.readline())
    os.kill(server_pid, 0)  # running
    parent.send_signal(signal.SIGKILL)
    parent.wait(10)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(server_pid, 0)
        except ProcessLookupError:
            break
        # A zombie until init reaps it: /proc tells a dead process from a live one.
        status = Path(f"/proc/{server_pid}/status")
        if status.exists() and "State:\tZ" in status.read_text():
            break
        time.sleep(0.1)
    else:
        pytest.fail(f"moto_server {server_pid} outlived its killed parent")


def test_every_tls_connection_ends_with_close_notify() -> None:
    """werkzeug closes each connection after its response; without close_notify a client that reads to
    the end of the connection sees a truncated stream (pgBackRest 2.45 fails every PUT)."""
    import socket

    with LocalS3Endpoint() as s3:
        assert s3.ca_file is not None
        _client(s3.url, str(s3.ca_file)).create_bucket(Bucket="close-notify")  # type: ignore[attr-defined]
        context = ssl.create_default_context(cafile=str(s3.ca_file))
        with socket.create_connection(("127.0.0.1", s3.port), timeout=10) as raw, \
                context.wrap_socket(raw, server_hostname="localhost", suppress_ragged_eofs=False) as tls:
            tls.sendall(b"PUT /close-notify/k HTTP/1.1\r\nHost: localhost\r\nContent-Length: 2\r\n\r\nhi")
            received = b""
            while chunk := tls.recv(65536):   # raises SSLEOFError on an EOF without close_notify
                received += chunk
        assert received.startswith(b"HTTP/1.1 200") and b"Connection: close" in received


def test_an_endpoint_not_started_makes_no_folder() -> None:
    assert LocalS3Endpoint().folder is None


def test_a_start_that_fails_leaves_nothing(tmp_path: Path) -> None:
    endpoint = LocalS3Endpoint(folder=tmp_path / "endpoint")
    with pytest.raises(SourceError, match=r"^the local S3 endpoint \(moto_server\) did not start within 0 s"):
        endpoint.start(timeout=0.0)  # no time to answer: said as not started
    assert not (tmp_path / "endpoint").exists()
    assert endpoint.process is None


def test_a_python_without_motos_server_is_told_which_extra_to_install(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    from verification.errors import ConfigError

    # None in sys.modules: `import moto` fails here as where moto is not installed.
    monkeypatch.setitem(sys.modules, "moto", None)
    monkeypatch.setitem(sys.modules, "flask_cors", None)
    endpoint = LocalS3Endpoint(folder=tmp_path / "endpoint")
    with pytest.raises(ConfigError) as raised:
        endpoint.start()
    assert str(raised.value) == ("the local S3 endpoint needs moto's server mode, not installed here (missing: moto, "
                                 "flask_cors): install restoreproof with its extra s3-demo, "
                                 "pip install 'restoreproof[s3-demo]'")
    assert endpoint.process is None and not (tmp_path / "endpoint").exists()  # nothing made


def test_the_extra_named_brings_what_the_endpoint_imports_and_boto3_is_a_dependency() -> None:
    import ast
    import tomllib

    from verification.demo import moto_tls
    from verification.demo.s3_endpoint import EXTRA, SERVER_MODULES

    root = Path(__file__).resolve().parents[3]
    project = tomllib.loads((root / "pyproject.toml").read_text())["project"]
    assert project["optional-dependencies"][EXTRA] == ["moto[server]>=5.0"]
    needed = {requirement.split(">")[0].split("[")[0] for requirement in project["dependencies"]}
    # What the S3 source, staging and direct mode import: dependencies of the package itself.
    assert {"boto3", "botocore", "s3transfer", "tenacity", "requests"} <= needed
    # Every module the endpoint's process imports is one the check looks for (or the standard library's).
    tree = ast.parse(Path(moto_tls.__file__).read_text())
    imported = {(node.module or "").split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    imported |= {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
                 for alias in node.names}
    assert imported - set(sys.stdlib_module_names) - {"__future__"} <= set(SERVER_MODULES)
    # moto's server application needs flask and flask-cors, which only its extra `server` brings.
    import importlib.util

    moto = importlib.util.find_spec("moto")
    assert moto is not None and moto.origin is not None
    werkzeug_app = Path(moto.origin).parent / "moto_server" / "werkzeug_app.py"
    assert "flask_cors" in werkzeug_app.read_text() and "flask_cors" in SERVER_MODULES
