"""Laying real backups out in object storage as their tools do, for the S3 source's tests."""

from __future__ import annotations

import csv
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

# Which server instance and database each folder of the SQL Server corpus holds, and which files are
# differentials, as the corpus README and MANIFEST.tsv say (and RESTORE HEADERONLY would). Ola
# Hallengren's DatabaseBackup names a server folder <server>$<instance>.
CORPUS_FOLDERS = {
    "DoubleDiffing": ("WIN-JNMR8KM0U3B$SQL2008R2SP2", "doublediff"),
    "OlaMsFilter/Simple": ("CGE100LAP-42$SQL2008R2SP2", "OlaMsFilterTest"),
    "OlaMsFilter/complex": ("CGE100LAP-42$SQL2008R2SP2", "OlaMsFilterTest"),
    "RestoreTimeClean": ("SQL2008", "RestoreTimeClean"),
    "backuppassword": ("JUMPBOX$SQL2008R2", "stripetest"),
    "detachattach": ("WORKSTATIONX$SQL2008R2SP2", "detachattach"),
    "restoretimeclean2016": ("WIN-JNMR8KM0U3B$SQL2016", "RestoreTimeClean"),
    "singlerestore/singlerestore.bak": ("SQL2008", "singlerestore"),
    "singlerestore/testlastbackup.bak": ("WORKSTATIONX$SQL2008R2SP2", "testlastbackup"),
    "sql2008-backups/Noextension.bak": ("SQL2008", "NoExtension"),
    "sql2008-backups/RestoreTimeStripe": ("CGE100LAP-42$SQL2008R2SP2", "RestoreTimeStripe"),
    "sql2008-backups/SimpleRecovery": ("CGE100LAP-42$SQL2008R2SP2", "SimpleBackTest"),
    "sql2008-backups/StopAt": ("JUMPBOX$SQL2008R2", "StopAt"),
    "history/sql2016-stripe": ("CGE100LAP-42$SQLEXPRESS2016", "RestoreTimeStripe"),
    "history/compressed": ("SPFARM$SHAREPOINT", "SharePoint_Config"),
}
DIFFERENTIALS = {"RestoreTimeClean/RestoreTimeClean2.bak", "restoretimeclean2016/RestoreTimeClean2.bak",
                 "sql2008-backups/SimpleRecovery/SimpleBackTest_1.bak",
                 "sql2008-backups/SimpleRecovery/SimpleBackTest_2.bak"}


def corpus_files(corpus: Path) -> list[str]:
    with (corpus / "MANIFEST.tsv").open(newline="") as manifest:
        return [row["file"] for row in csv.DictReader(manifest, delimiter="\t")]


def _owner(relative: str) -> tuple[str, str]:
    for folder in sorted(CORPUS_FOLDERS, key=len, reverse=True):
        if relative == folder or relative.startswith(folder + "/"):
            return CORPUS_FOLDERS[folder]
    if relative.startswith("sql2008-backups/"):  # already <db>/FULL|DIFF|LOG/ on the instance SQL2008
        return "SQL2008", relative.split("/")[1]
    raise KeyError(f"no owner known for {relative}: add it to CORPUS_FOLDERS")


def _kind(relative: str) -> str:
    name = relative.lower().rsplit("/", 1)[-1]
    if name.endswith(".trn"):
        return "LOG"
    if "full" not in name and (relative in DIFFERENTIALS or "diff" in name):
        return "DIFF"
    return "FULL"


def ola_layout(corpus: Path) -> dict[str, Path]:
    """Every file of the corpus under Ola Hallengren's names:
    <server>/<db>/FULL|DIFF|LOG/<server>_<db>_<TYPE>_yyyymmdd_hhmmss[_<stripe>].bak|trn.
    The times in the names are made up (one minute apart, in the manifest's order): restoreproof reads
    headers, never names. A stripe's family is its folder's number (Stripe1, Stripe2)."""
    layout: dict[str, Path] = {}
    for index, relative in enumerate(corpus_files(corpus)):
        server, database = _owner(relative)
        kind = _kind(relative)
        stamp = f"20261124_{index // 60:02d}{index % 60:02d}00"
        stripe = next((f"_{part[-1]}" for part in relative.split("/") if part.startswith("Stripe")), "")
        extension = "trn" if kind == "LOG" else "bak"
        name = f"{server}/{database}/{kind}/{server}_{database}_{kind}_{stamp}{stripe}.{extension}"
        assert name not in layout, f"two corpus files laid out as {name}"
        layout[name] = corpus / relative
    return layout


def lay_out(mapping: dict[str, Path], root: Path) -> Path:
    """The same layout as a local folder."""
    for relative, source in mapping.items():
        target = root / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)
    return root


def upload_tree(client: Any, bucket: str, prefix: str, root: Path, mapping: dict[str, Path] | None = None) -> int:
    """Every file under `root` (or of `mapping`: key -> file) put under `prefix`, in parallel; the count."""
    files = mapping or {p.relative_to(root).as_posix(): p for p in sorted(root.rglob("*")) if p.is_file()}
    base = prefix.strip("/") + "/" if prefix.strip("/") else ""

    def put(item: tuple[str, Path]) -> None:
        client.put_object(Bucket=bucket, Key=base + item[0], Body=item[1].read_bytes())

    with ThreadPoolExecutor(16) as pool:
        list(pool.map(put, files.items()))
    return len(files)


class LeavingOut:
    """An S3-compatible store that leaves fields out of its answers, as some do: moto's server behind a
    plain-HTTP front on 127.0.0.1 that passes every request on as it is and takes the named elements out
    of each listing's objects (`<Contents>`'s ETag, Size, ...) and the named headers out of every answer
    (HEAD's and GET's ETag). The requests' headers are kept (`requests`: method, path, headers) to show
    what a client asked. `with LeavingOut(endpoint, elements={"ETag"}) as store:` -> store.url."""

    def __init__(self, endpoint: Any, elements: frozenset[str] | set[str] = frozenset(),
                 headers: frozenset[str] | set[str] = frozenset()) -> None:
        self.endpoint = endpoint
        self.elements = frozenset(elements)
        self.headers = frozenset(h.lower() for h in headers)
        self.requests: list[tuple[str, str, dict[str, str]]] = []
        self._server: Any = None
        self._thread: Any = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def _left_out(self, body: bytes) -> bytes:
        import re

        if b"<ListBucketResult" not in body or not self.elements:
            return body
        fields = re.compile(rb"<(" + b"|".join(re.escape(n.encode()) for n in self.elements) + rb")>[^<]*</\1>")
        return re.sub(rb"<Contents>.*?</Contents>", lambda found: fields.sub(b"", found.group(0)), body, flags=re.S)

    def __enter__(self) -> LeavingOut:
        import http.client
        import ssl
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
        from urllib.parse import urlsplit

        store = self
        target = urlsplit(self.endpoint.url)
        context = ssl.create_default_context(cafile=str(self.endpoint.ca_file))

        class Front(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _pass_on(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                asked = {k: v for k, v in self.headers.items()}
                store.requests.append((self.command, self.path, asked))
                upstream = http.client.HTTPSConnection(target.hostname, target.port, context=context, timeout=30)
                try:
                    upstream.request(self.command, self.path, body=body, headers=asked)
                    answer = upstream.getresponse()
                    data = answer.read()
                    # A HEAD's Content-Length is the object's: kept as it is; any other is the body's, sent anew.
                    framing = {"transfer-encoding", "connection"} | ({"content-length"} if self.command != "HEAD"
                                                                      else set())
                    kept = [(k, v) for k, v in answer.getheaders() if k.lower() not in store.headers | framing]
                finally:
                    upstream.close()
                data = store._left_out(data)
                self.send_response(answer.status, answer.reason)
                for name, value in kept:
                    self.send_header(name, value)
                if self.command != "HEAD":
                    self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)

            do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = _pass_on

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Front)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()
