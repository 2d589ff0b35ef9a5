"""moto's server for LocalS3Endpoint (`python -m verification.demo.moto_tls`), ending each TLS
connection with TLS's close_notify.

Why: werkzeug's development server, which `moto_server` runs, closes every connection after its
response (`Connection: close`), and Python's ssl socket closes without close_notify. A client that
reads a response up to the end of its connection then sees a truncated stream: pgBackRest 2.45
(OpenSSL 3) fails every PUT of an object with "TLS error [1:167772454] unexpected eof while reading"
(moto answers it with no body, as text/html, and pgBackRest forgives a missing close_notify only
after XML or JSON). Real S3 keeps its connections open, so this is the local endpoint's fault, fixed
here: the same moto application and request handler as `moto_server`, on a server whose connections
end with close_notify.

Options as moto_server's: -H HOST -p PORT [-c CERT -k KEY].
"""

from __future__ import annotations

import argparse
import contextlib
import ssl
from typing import Any

from werkzeug.serving import ThreadedWSGIServer

# How long a client may take to answer close_notify before its connection is closed anyway.
CLOSE_NOTIFY_SECONDS = 5.0


class CloseNotifyServer(ThreadedWSGIServer):
    """werkzeug's threaded server, sending close_notify before it closes a TLS connection."""

    def shutdown_request(self, request: Any) -> None:
        if isinstance(request, ssl.SSLSocket):
            with contextlib.suppress(OSError, ValueError):
                request.settimeout(CLOSE_NOTIFY_SECONDS)
                request.unwrap()  # sends close_notify; the client's own may never come (suppressed)
        super().shutdown_request(request)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m verification.demo.moto_tls")
    parser.add_argument("-H", "--host", default="127.0.0.1")
    parser.add_argument("-p", "--port", type=int, default=5000)
    parser.add_argument("-c", "--ssl-cert")
    parser.add_argument("-k", "--ssl-key")
    args = parser.parse_args(argv)
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app

    app = DomainDispatcherApplication(create_backend_app)
    tls = (args.ssl_cert, args.ssl_key) if args.ssl_cert else None
    server = CloseNotifyServer(args.host, args.port, app, handler=MotoRequestHandler, ssl_context=tls)
    print(f" * Running on {'https' if tls else 'http'}://{args.host}:{args.port}", flush=True)
    with contextlib.suppress(KeyboardInterrupt):
        server.serve_forever()
    server.server_close()


if __name__ == "__main__":
    main()

