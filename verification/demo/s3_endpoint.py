"""A real S3 endpoint on 127.0.0.1 for the demo and the tests: moto's server mode, in its own process.

pgBackRest speaks S3 only over TLS, so the endpoint serves HTTPS with a certificate made here, for
127.0.0.1 and localhost, signed by a throwaway CA whose certificate clients are told to trust
(`ca_file`); nothing is added to the system's trust store. moto runs behind a server of ours
(verification/demo/moto_tls.py) that ends each TLS connection with close_notify, without which
pgBackRest cannot PUT an object. The server dies with its parent
(PR_SET_PDEATHSIG); its folder (the certificates, the server's key and moto's log) is made by start()
and removed by stop(), also when start() fails or is interrupted. A run killed outright (SIGKILL)
leaves that folder in the temporary directory: a key of a certificate valid for two days, for
127.0.0.1, that nothing else trusts. moto keeps the objects in memory: they live as long as the
endpoint does.
"""

from __future__ import annotations

import importlib.util
import ipaddress
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import TracebackType

from verification.demo.processes import die_with_parent, stop_child
from verification.errors import ConfigError, SourceError

HOST = "127.0.0.1"
# The extra that brings the endpoint's server (moto's server mode: moto, werkzeug, flask, flask-cors),
# and what its process and its clients import; boto3 is a dependency of restoreproof itself.
EXTRA = "s3-demo"
SERVER_MODULES = ("moto", "werkzeug", "flask", "flask_cors", "boto3")


def missing_modules(names: tuple[str, ...] = SERVER_MODULES) -> list[str]:
    """The modules of `names` this Python cannot import (found without importing them)."""
    missing = []
    for name in names:
        try:
            found = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            found = None
        if found is None:
            missing.append(name)
    return missing


def require_server() -> None:
    """ConfigError naming the extra to install when the endpoint's server cannot run here."""
    if missing := missing_modules():
        raise ConfigError(f"the local S3 endpoint needs moto's server mode, not installed here (missing: "
                          f"{', '.join(missing)}): install restoreproof with its extra {EXTRA}, "
                          f"pip install 'restoreproof[{EXTRA}]'")
# Any key works against moto; these are what the demo's and the tests' clients send.
DEMO_ACCESS_KEY = "restoreproof-demo"
DEMO_SECRET_KEY = "restoreproof-demo-secret"
DEMO_REGION = "us-east-1"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind((HOST, 0))
        return int(probe.getsockname()[1])


def make_certificate(folder: Path, hosts: tuple[str, ...] = (HOST, "localhost")) -> tuple[Path, Path, Path]:
    """A CA and a server certificate it signs for `hosts`: (ca.pem, server.pem, server.key)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = datetime.now(UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "restoreproof local S3 CA")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number()).not_valid_before(now - timedelta(minutes=5))
          .not_valid_after(now + timedelta(days=2))
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=False, content_commitment=False, key_encipherment=False,
                                       data_encipherment=False, key_agreement=False, key_cert_sign=True,
                                       crl_sign=True, encipher_only=False, decipher_only=False), critical=True)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    names: list[x509.GeneralName] = []
    for host in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    server = (x509.CertificateBuilder()
              .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, hosts[0])]))
              .issuer_name(ca_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
              .not_valid_before(now - timedelta(minutes=5)).not_valid_after(now + timedelta(days=2))
              .add_extension(x509.SubjectAlternativeName(names), critical=False)
              .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
              .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
              .sign(ca_key, hashes.SHA256()))
    ca_file, cert_file, key_file = folder / "ca.pem", folder / "server.pem", folder / "server.key"
    ca_file.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    cert_file.write_bytes(server.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    key_file.chmod(0o600)
    return ca_file, cert_file, key_file


@dataclass
class LocalS3Endpoint:
    """`with LocalS3Endpoint() as s3:` -> s3.url (https://127.0.0.1:PORT), s3.ca_file."""

    tls: bool = True
    port: int = 0
    folder: Path | None = None  # made by start() when not given
    process: subprocess.Popen[bytes] | None = None
    ca_file: Path | None = None

    @property
    def url(self) -> str:
        return f"{'https' if self.tls else 'http'}://{HOST}:{self.port}"

    def start(self, timeout: float = 30.0) -> LocalS3Endpoint:
        try:
            return self._start(timeout)
        except BaseException:  # a failure or an interrupt while starting: nothing is left either
            self.stop()
            raise

    def _start(self, timeout: float) -> LocalS3Endpoint:
        require_server()  # before anything is made: a process that cannot start says why, not a timeout
        if self.folder is None:
            self.folder = Path(tempfile.mkdtemp(prefix="restoreproof-s3-"))
        self.folder.mkdir(parents=True, exist_ok=True)
        self.folder.chmod(0o700)
        # moto's application and handler, as moto_server runs them, on a server that ends TLS properly.
        command = [sys.executable, "-m", "verification.demo.moto_tls", "-H", HOST, "-p", str(self.port or 0)]
        if self.tls:
            self.ca_file, cert, key = make_certificate(self.folder)
            command += ["-c", str(cert), "-k", str(key)]
        deadline = time.monotonic() + timeout
        for _attempt in range(5):  # a port taken between choosing it and binding it: choose again
            self.port = self.port or _free_port()
            command[command.index("-p") + 1] = str(self.port)
            log = (self.folder / "moto.log").open("wb")
            self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                            preexec_fn=die_with_parent)
            log.close()
            while time.monotonic() < deadline and self.process.poll() is None:
                if self._answers():
                    return self
                time.sleep(0.1)
            if self.process.poll() is None:
                break
            self.port = 0
        output = (self.folder / "moto.log").read_text(errors="replace")[-2000:]
        raise SourceError(f"the local S3 endpoint (moto_server) did not start within {timeout:.0f} s: {output}")

    def _answers(self) -> bool:
        try:
            with socket.create_connection((HOST, self.port), timeout=0.5):
                return True
        except OSError:
            return False

    def stop(self) -> None:
        stop_child(self.process)
        self.process = None
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)

    def client_environment(self) -> dict[str, str]:
        """What boto3 (and restoreproof's S3 source) reads to reach this endpoint."""
        env = {"AWS_ENDPOINT_URL": self.url, "AWS_ACCESS_KEY_ID": DEMO_ACCESS_KEY,
               "AWS_SECRET_ACCESS_KEY": DEMO_SECRET_KEY, "AWS_DEFAULT_REGION": DEMO_REGION}
        if self.ca_file is not None:
            env["AWS_CA_BUNDLE"] = str(self.ca_file)
        return env

    def __enter__(self) -> LocalS3Endpoint:
        return self.start()

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.stop()
