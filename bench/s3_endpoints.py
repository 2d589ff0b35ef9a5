"""The local S3 endpoints the S3 benches measure against, each a real server in its own process on 127.0.0.1.

- moto: moto's server mode, as the tests use it (verification/demo/s3_endpoint.py): one Python process,
  objects in memory, a thread and a new connection per request.
- garage: Garage (Deuxfleurs' S3 store in Rust, crates.io `garage`), one node, installed by
  `make bench-s3` into build/garage-<version> (ignored, never committed). It serves the catalogue as S3
  does where moto differs: it keeps connections open, and like S3 (and moto) lists ETags, honours
  If-Match on GetObject (412 on another ETag) and lists unfinished multipart uploads. Its data and
  metadata live in a temporary folder removed on stop; fsync is off and blocks are not compressed.
  Two things it costs that S3 would not (measured 2026-11-25, a quiet machine): about 2 ms of CPU per
  16 KiB ranged GET (it reads and hashes the whole block, here the whole object, for any range), as
  much as moto; and about 44 ms per ranged GET on one connection, whatever its size (its server sets
  no TCP_NODELAY, so the body waits for the client's delayed ACK of the headers): with 16 threads, no
  more than about 360 GETs/s.

Why not s3s-fs (crates.io, "an experimental S3 server based on file system"), cheaper per GET (0.93 ms
of CPU per 16 KiB ranged GET, the same 44 ms stall): 0.14.1, the last that builds with this machine's
Rust (1.95; later ones need 1.96), lists no ETag (the S3 source keys every read and the header cache
on it), ignores If-Match on GetObject and answers ListMultipartUploads with NotImplemented, and no
later version does better: the catalogue cannot run against it as it runs against S3.
"""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Protocol

from verification.demo.processes import die_with_parent, stop_child
from verification.demo.s3_endpoint import DEMO_REGION, HOST, LocalS3Endpoint, _free_port

GARAGE_VERSION = "2.5.0"  # what `make bench-s3` installs (Makefile's GARAGE_VERSION)
DEFAULT_GARAGE = Path(__file__).resolve().parents[1] / "build" / f"garage-{GARAGE_VERSION}" / "bin" / "garage"


class Endpoint(Protocol):
    """What the benches need of an endpoint."""

    port: int
    ca_file: Path | None

    @property
    def url(self) -> str: ...

    @property
    def pid(self) -> int: ...

    def describe(self) -> str: ...

    def client_environment(self) -> dict[str, str]: ...

    def __enter__(self) -> Endpoint: ...

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 trace: TracebackType | None) -> None: ...


class MotoEndpoint(LocalS3Endpoint):
    """The tests' endpoint (moto_server), saying which moto it is and its process id."""

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def describe(self) -> str:
        import moto

        return f"moto {moto.__version__} (moto_server's application on werkzeug, one Python process)"

    def __enter__(self) -> MotoEndpoint:
        self.start()
        return self


@dataclass
class GarageEndpoint:
    """`with GarageEndpoint(binary) as s3:` -> a one-node Garage on http://127.0.0.1:PORT with a key and a
    bucket (`bucket`) made at start by Garage's --single-node --default-bucket."""

    binary: Path
    bucket: str
    port: int = 0
    ca_file: Path | None = None  # plain HTTP only
    folder: Path | None = None
    process: subprocess.Popen[bytes] | None = None
    # Garage's own key format: GK + 24 hex digits, a secret of 64 hex digits.
    access_key: str = field(default_factory=lambda: "GK" + secrets.token_hex(12))
    secret_key: str = field(default_factory=lambda: secrets.token_hex(32))

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def version(self) -> str:
        found = subprocess.run([str(self.binary), "--version"], capture_output=True, text=True, check=True)
        return found.stdout.strip()

    def describe(self) -> str:
        return f"{self.version()} (Rust, one node, LMDB metadata, blocks uncompressed, fsync off)"

    def start(self, timeout: float = 30.0) -> GarageEndpoint:
        if not self.binary.is_file():
            raise SystemExit(f"{self.binary} is not there: `make bench-s3` installs Garage {GARAGE_VERSION} into "
                             f"build/garage-{GARAGE_VERSION} (cargo install --locked garage)")
        try:
            return self._start(timeout)
        except BaseException:
            self.stop()
            raise

    def _start(self, timeout: float) -> GarageEndpoint:
        self.folder = Path(tempfile.mkdtemp(prefix="restoreproof-garage-"))
        self.folder.chmod(0o700)
        self.port = self.port or _free_port()
        rpc_port = _free_port()
        config = self.folder / "garage.toml"
        config.write_text(
            f'metadata_dir = "{self.folder / "meta"}"\n'
            f'data_dir = "{self.folder / "data"}"\n'
            'db_engine = "lmdb"\n'
            "replication_factor = 1\n"
            "metadata_fsync = false\n"
            "data_fsync = false\n"
            'compression_level = "none"\n'
            f'rpc_bind_addr = "{HOST}:{rpc_port}"\n'
            f'rpc_public_addr = "{HOST}:{rpc_port}"\n'
            f'rpc_secret = "{secrets.token_hex(32)}"\n'
            "[s3_api]\n"
            f's3_region = "{DEMO_REGION}"\n'
            f'api_bind_addr = "{HOST}:{self.port}"\n')
        config.chmod(0o600)
        environment = {**os.environ, "GARAGE_DEFAULT_ACCESS_KEY": self.access_key,
                       "GARAGE_DEFAULT_SECRET_KEY": self.secret_key, "GARAGE_DEFAULT_BUCKET": self.bucket,
                       "RUST_LOG": "warn"}
        log = (self.folder / "garage.log").open("wb")
        self.process = subprocess.Popen(
            [str(self.binary), "-c", str(config), "server", "--single-node", "--default-bucket"],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=environment,
            preexec_fn=die_with_parent)
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self.process.poll() is None:
            if self._ready():
                return self
            time.sleep(0.1)
        output = (self.folder / "garage.log").read_text(errors="replace")[-2000:]
        raise SystemExit(f"Garage did not start within {timeout:.0f} s: {output}")

    def _ready(self) -> bool:
        """The port answers and the default bucket is there (made once the layout is applied)."""
        try:
            socket.create_connection((HOST, self.port), timeout=0.5).close()
        except OSError:
            return False
        import boto3

        client = boto3.client("s3", endpoint_url=self.url, aws_access_key_id=self.access_key,
                              aws_secret_access_key=self.secret_key, region_name=DEMO_REGION)
        try:
            client.head_bucket(Bucket=self.bucket)
            return True
        except Exception:  # not ready yet, whatever it says: asked again until the deadline
            return False
        finally:
            client.close()

    def stop(self) -> None:
        stop_child(self.process)
        self.process = None
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)

    def client_environment(self) -> dict[str, str]:
        return {"AWS_ENDPOINT_URL": self.url, "AWS_ACCESS_KEY_ID": self.access_key,
                "AWS_SECRET_ACCESS_KEY": self.secret_key, "AWS_DEFAULT_REGION": DEMO_REGION}

    def __enter__(self) -> GarageEndpoint:
        return self.start()

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.stop()
