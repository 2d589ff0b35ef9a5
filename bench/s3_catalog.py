"""The S3 source's catalogue: parallel listing against one sequential paginator, and header reads.

    .venv/bin/python bench/s3_catalog.py [--endpoint moto garage] [--objects 10000] [--threads 16] [--repeat 3]
        [--latency-ms 0 20 50]

In each local S3 endpoint asked (bench/s3_endpoints.py: moto's server mode, the tests' endpoint, plain HTTP
unless --tls; Garage, an S3 store in Rust that `make bench-s3` installs into build/; each a
process of its own, one after the other in the same run), puts `--objects` objects in Ola
Hallengren's layout (<server>/<db>/FULL|DIFF|LOG/<server>_<db>_<TYPE>_<time>.bak|trn: 4 servers, 25
databases each, 100 backups per database), each a real SQL Server log backup of the corpus
(../shared/testdata/mssql-backups) of 48 to 256 KiB, so a header read is the real head and trailer.

Then, for each latency asked (0: the endpoint as it is; else a TCP relay adding that many
milliseconds before each answer, as a remote endpoint would), the median of `--repeat` times of:
- the listing: S3Source opened (client made, prefix listed: folders found with a delimiter, each
  listed whole by its own paginator, `--threads` at once);
- the real alternative: one client and one sequential list_objects_v2 paginator over the prefix.

Then, without added latency, the SQL Server catalogue (listing and header reads, as planning makes
it), the median of `--repeat` rounds of:
- cold: no header cache (a state folder of its own each round);
- warm: the same again, nothing changed (every header from the cache);
- a night: 1 % of objects new since (new log backups), then removed again for the next round;
- the real alternative, in the same round: one sequential paginator, then each object's headers read
  one object after the other (what reading one header per file, file by file, amounts to), by the
  same MTF reader through a plain boto3 client;
with the endpoint's CPU per GET (utime + stime of the server's process, from /proc/<pid>/stat), what it
bounds the cold catalogue to, and restoreproof's own CPU per GET. Last, the real corpus planned from S3,
cold and warm; and a summary of the cold catalogue against every endpoint.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import csv
import multiprocessing
import os
import socket
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
from botocore.config import Config
from s3_endpoints import DEFAULT_GARAGE, Endpoint, GarageEndpoint, MotoEndpoint  # this folder's

from verification.config import S3Settings, Settings
from verification.demo.s3_endpoint import HOST, _free_port
from verification.engines.mssql.catalog import scan
from verification.engines.mssql.header_cache import HeaderCache
from verification.engines.mssql.mtf import read_backup_header
from verification.sources.s3 import S3Source

KiB = 1024
SERVERS, DATABASES = 4, 25
PER_DATABASE = {"FULL": 5, "DIFF": 15, "LOG": 80}  # 100 backups per database
BUCKET = "bench-backups"


def corpus_logs(corpus: Path) -> list[bytes]:
    with (corpus / "MANIFEST.tsv").open(newline="") as manifest:
        rows = list(csv.DictReader(manifest, delimiter="\t"))
    files = [corpus / r["file"] for r in rows
             if r["file"].endswith(".trn") and 48 * KiB < int(r["bytes"]) <= 256 * KiB]
    return [f.read_bytes() for f in sorted(files)]


def ola_keys(count: int) -> list[str]:
    keys = []
    for server in range(SERVERS):
        name = f"SQL{server:02d}$PROD"
        for database in range(DATABASES):
            db = f"shop{database:02d}"
            for kind, many in PER_DATABASE.items():
                extension = "trn" if kind == "LOG" else "bak"
                for n in range(many):
                    keys.append(f"ola/{name}/{db}/{kind}/{name}_{db}_{kind}_20261124_{n // 60:02d}{n % 60:02d}00."
                                f"{extension}")
    while len(keys) < count:  # more than 10,000 asked: further logs of the first database
        keys.append(f"ola/SQL00$PROD/shop00/LOG/SQL00$PROD_shop00_LOG_20261125_{len(keys):06d}.trn")
    return keys[:count]


def _relay(port: int, target_port: int, latency: float) -> None:
    """Relay 127.0.0.1:port to the endpoint, waiting `latency` seconds before each answer."""

    async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, asked: list[bool],
                   answers: bool) -> None:
        try:
            while data := await reader.read(65536):
                if answers and asked[0]:
                    asked[0] = False
                    await asyncio.sleep(latency)
                elif not answers:
                    asked[0] = True
                writer.write(data)
                await writer.drain()
        except ConnectionError:
            pass
        finally:
            writer.close()

    async def relay(client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        server_reader, server_writer = await asyncio.open_connection(HOST, target_port)
        asked = [False]
        await asyncio.gather(pipe(client_reader, server_writer, asked, False),
                             pipe(server_reader, client_writer, asked, True))

    async def serve() -> None:
        server = await asyncio.start_server(relay, HOST, port)
        async with server:
            await server.serve_forever()

    asyncio.run(serve())


@contextlib.contextmanager
def delayed(target_port: int, latency: float) -> Iterator[int]:
    """A TCP relay to the endpoint, in a process of its own, that waits `latency` seconds before each
    answer (one round trip per request, as a remote endpoint costs); TLS passes through untouched.
    Yields its port."""
    port = _free_port()
    relay = multiprocessing.get_context("fork").Process(target=_relay, args=(port, target_port, latency), daemon=True)
    relay.start()
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection((HOST, port), timeout=0.5).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        yield port
    finally:
        relay.terminate()
        relay.join(10)


def median_seconds(work: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    times, result = [], None
    for _ in range(repeat):
        started = time.perf_counter()
        result = work()
        times.append(time.perf_counter() - started)
    return statistics.median(times), result


def sequential_listing(url: str, ca_file: Path | None) -> dict[str, tuple[int, str]]:
    client = boto3.client("s3", endpoint_url=url, verify=str(ca_file) if ca_file else None,
                          config=Config(retries={"mode": "standard"}))
    found = {}
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix="ola/"):
        for item in page.get("Contents", []):
            found[item["Key"]] = (item["Size"], item["ETag"])
    client.close()
    return found


def compare(url: str, ca_file: Path | None, args: argparse.Namespace, count: int, latency: float) -> None:
    """The catalogue against one sequential paginator, through `url`."""
    settings = S3Settings(endpoint_url=url, ca_bundle=ca_file, threads=args.threads)
    parallel, source = median_seconds(lambda: S3Source(f"s3://{BUCKET}/ola", settings), args.repeat)
    sequential, listed = median_seconds(lambda: sequential_listing(url, ca_file), args.repeat)
    assert len(source.paths()) == len(listed) == count
    requests = source.stats.requests
    print(f"latency +{latency:g} ms per request: catalogue {parallel:.3f} s "
          f"({requests['ListObjectsV2']} list requests + {requests['ListMultipartUploads']} for uploads, "
          f"{count / parallel:,.0f} objects/s); sequential paginator {sequential:.3f} s "
          f"({-(-count // 1000)} pages, {count / sequential:,.0f} objects/s); "
          f"ratio sequential/catalogue {sequential / parallel:.2f}")


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process, from /proc/<pid>/stat (fields 14 and 15, in clock ticks)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclass
class Catalogued:
    """One catalogue: objects, seconds, what it asked of the endpoint and what that cost the endpoint."""

    objects: int
    seconds: float
    gets: int
    bytes_read: int
    most_bytes: int
    from_cache: int
    endpoint_cpu: float
    own_cpu: float  # restoreproof's (this process's) CPU seconds
    headers: int  # objects whose header says they are a backup
    alternative: float = 0.0  # objects/s of the one-by-one alternative in the same rounds

    @property
    def per_second(self) -> float:
        return self.objects / self.seconds


def catalogue(settings: Settings, pid: int) -> Catalogued:
    """The catalogue as planning makes it: the prefix listed, then every object's header read or
    taken from the header cache."""
    endpoint_cpu, own_cpu = cpu_seconds(pid), time.process_time()
    started = time.perf_counter()
    with S3Source(f"s3://{BUCKET}/ola", settings.s3) as source:
        cache = HeaderCache.for_source(settings, source)
        try:
            found = scan(source, [], cache if cache.enabled else None)
        finally:
            cache.close()
        seconds = time.perf_counter() - started
        stats = source.stats
        objects = len(source.paths())
    return Catalogued(objects, seconds, stats.requests["GetObject"], stats.bytes_read,
                      max(stats.bytes_by_path.values(), default=0), found.files_cached,
                      cpu_seconds(pid) - endpoint_cpu, time.process_time() - own_cpu,
                      sum(len(s.families) + len(s.copy_headers) for d in found.databases for s in d.sets))


class _RangedGets:
    """A plain boto3 client's ranged GET per read: the MTF reader's reads, one request each."""

    def __init__(self, client: Any, key: str, size: int) -> None:
        self.client, self.key, self._size, self.name = client, key, size, key
        self.gets = 0

    def size(self) -> int:
        return self._size

    def read(self, offset: int, length: int) -> bytes:
        self.gets += 1
        answer = self.client.get_object(Bucket=BUCKET, Key=self.key, Range=f"bytes={offset}-{offset + length - 1}")
        return bytes(answer["Body"].read())


def one_by_one(url: str) -> Catalogued:
    """The real alternative: one sequential paginator, then the headers of one object after another."""
    client = boto3.client("s3", endpoint_url=url, config=Config(retries={"mode": "standard"}))
    started = time.perf_counter()
    listed: dict[str, int] = {}
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix="ola/"):
        listed.update((item["Key"], item["Size"]) for item in page.get("Contents", []))
    gets = headers = 0
    for key, size in listed.items():
        reader = _RangedGets(client, key, size)
        read_backup_header(reader)
        gets += reader.gets
        headers += 1
    seconds = time.perf_counter() - started
    client.close()
    return Catalogued(len(listed), seconds, gets, 0, 0, 0, 0.0, 0.0, headers)


def night_objects(bodies: list[bytes], count: int, round_: int) -> dict[str, bytes]:
    """`count` new log backups (new keys, as a night adds them), spread over the databases."""
    found = {}
    for n in range(count):
        server, database = f"SQL{n % SERVERS:02d}$PROD", f"shop{n % DATABASES:02d}"
        key = f"ola/{server}/{database}/LOG/{server}_{database}_LOG_20261125_r{round_}_{n:05d}.trn"
        found[key] = bodies[n % len(bodies)]
    return found


def compare_catalogues(endpoint: Endpoint, client: Any, bodies: list[bytes], args: argparse.Namespace,
                       count: int, work: Path) -> Catalogued:
    """Cold, warm and a night's catalogue against the one-by-one alternative, `--repeat` rounds. Returns
    the median cold catalogue."""
    pid = endpoint.pid
    rounds: dict[str, list[Catalogued]] = {"cold": [], "warm": [], "night": [], "one by one": []}
    new = max(1, count // 100)
    for round_ in range(args.repeat):
        settings = Settings(state_dir=work / f"state-{round_}", s3=S3Settings(threads=args.threads))
        rounds["cold"].append(catalogue(settings, pid))
        rounds["warm"].append(catalogue(settings, pid))
        added = night_objects(bodies, new, round_)
        with ThreadPoolExecutor(16) as pool:
            list(pool.map(lambda item: client.put_object(Bucket=BUCKET, Key=item[0], Body=item[1]), added.items()))
        rounds["night"].append(catalogue(settings, pid))
        with ThreadPoolExecutor(16) as pool:
            list(pool.map(lambda key: client.delete_object(Bucket=BUCKET, Key=key), added))
        rounds["one by one"].append(one_by_one(endpoint.url))
    median = {name: sorted(found, key=lambda c: c.seconds)[len(found) // 2] for name, found in rounds.items()}
    alternative = median["one by one"]
    print(f"SQL Server catalogue (listing + header reads, {args.threads} threads; median of {args.repeat} rounds; "
          f"the alternative in the same rounds):")
    print(f"  one by one (sequential paginator, then each object's headers, object after object): "
          f"{alternative.objects:,} objects in {alternative.seconds:.2f} s = {alternative.per_second:,.0f} objects/s "
          f"({alternative.gets:,} GETs, {alternative.gets / alternative.objects:.2f} per object)")
    for name, said in (("cold", "no header cache"), ("warm", "nothing changed"),
                       ("night", f"{new} objects new, 1 %")):
        found = median[name]
        print(f"  {name} ({said}): {found.objects:,} objects in {found.seconds:.2f} s = {found.per_second:,.0f} "
              f"objects/s, {found.per_second / alternative.per_second:.1f}x the alternative; {found.gets:,} GETs "
              f"({found.gets / found.objects:.2f} per object), {found.bytes_read / found.objects / KiB:.1f} KiB read "
              f"per object ({found.most_bytes / KiB:.1f} KiB at most), {found.from_cache:,} headers from the cache; "
              f"{found.headers:,} backup headers")
    cold = median["cold"]
    cold.alternative = alternative.per_second
    print(f"  cold, where the CPU goes: {bound(cold)}")
    return cold


def bound(cold: Catalogued) -> str:
    """What the CPU of both sides says of a cold catalogue: each side's CPU per GET, the objects/s each
    would allow with a core to itself, and how busy the machine's cores were."""
    per_object = cold.gets / cold.objects
    server, own = cold.endpoint_cpu / cold.gets, cold.own_cpu / cold.gets
    cores = os.cpu_count() or 1
    return (f"the endpoint {server * 1000:.2f} ms of CPU per GET ({cold.endpoint_cpu / cold.seconds:.2f} of a core "
            f"on average; at {per_object:.2f} GETs per object at most {1 / (server * per_object):,.0f} objects/s with "
            f"a core to itself); restoreproof {own * 1000:.2f} ms per GET, listing and parsing included "
            f"({cold.own_cpu / cold.seconds:.2f} of a core; at most {1 / (own * per_object):,.0f} objects/s with "
            f"one core); both {(server + own) * 1000:.2f} ms per GET, "
            f"{(cold.endpoint_cpu + cold.own_cpu) / cold.seconds:.2f} of the {cores} cores busy: at most "
            f"{cores / ((server + own) * per_object):,.0f} objects/s with all {cores}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", type=Path,
                        default=Path(__file__).resolve().parents[2] / "shared" / "testdata" / "mssql-backups")
    parser.add_argument("--endpoint", nargs="+", choices=["moto", "garage"], default=["moto", "garage"],
                        help="the local S3 endpoints to measure against, one after the other (default: both)")
    parser.add_argument("--garage", type=Path, default=DEFAULT_GARAGE,
                        help="Garage's binary (default: what make bench-s3 installs)")
    parser.add_argument("--objects", type=int, default=10_000)
    parser.add_argument("--threads", type=int, default=16)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--latency-ms", type=float, nargs="+", default=[0.0, 20.0, 50.0])
    # moto's server (werkzeug) makes each TLS handshake in its accepting thread, one at a time: with a
    # round trip added, new connections queue there, which measures moto, not the listing.
    parser.add_argument("--tls", action="store_true", help="serve moto's endpoint over TLS (default: plain HTTP)")
    args = parser.parse_args()
    bodies = corpus_logs(args.corpus)
    keys = ola_keys(args.objects)
    print(f"cpus: {os.cpu_count()}; threads: {args.threads}; median of {args.repeat}")
    cold: dict[str, tuple[str, Catalogued]] = {}
    for name in args.endpoint:
        endpoint: Endpoint = MotoEndpoint(tls=args.tls) if name == "moto" else GarageEndpoint(args.garage, BUCKET)
        with endpoint:
            described = endpoint.describe()
            print(f"\n== endpoint {name}: {described}, {endpoint.url}")
            cold[name] = (described, measure(endpoint, bodies, keys, args))
    print(f"\nSummary: the cold catalogue (no header cache; {args.objects:,} objects), median of {args.repeat}")
    for name, (described, found) in cold.items():
        print(f"  {name} ({described}): {found.per_second:,.0f} objects/s, {found.per_second / found.alternative:.1f}x "
              f"one by one ({found.alternative:,.0f} objects/s); {bound(found)}")


def measure(endpoint: Endpoint, bodies: list[bytes], keys: list[str], args: argparse.Namespace) -> Catalogued:
    """Everything the bench measures against one endpoint; returns its median cold catalogue."""
    for name in ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION",
                 "AWS_CA_BUNDLE"):
        os.environ.pop(name, None)  # the endpoint before's
    os.environ.update(endpoint.client_environment())
    boto3.setup_default_session()  # boto3.client's session keeps the credentials it first read
    client = boto3.client("s3", config=Config(max_pool_connections=32))
    if BUCKET not in {bucket["Name"] for bucket in client.list_buckets()["Buckets"]}:
        client.create_bucket(Bucket=BUCKET)  # Garage has made it as it started; moto has not
    started = time.perf_counter()

    def put(index: int) -> None:
        client.put_object(Bucket=BUCKET, Key=keys[index], Body=bodies[index % len(bodies)])

    with ThreadPoolExecutor(32) as pool:
        list(pool.map(put, range(len(keys))))
    stored = sum(len(bodies[i % len(bodies)]) for i in range(len(keys)))
    print(f"{len(keys):,} objects in Ola's layout ({SERVERS} servers x {DATABASES} databases x "
          f"FULL/DIFF/LOG), {stored / 2**20:,.0f} MiB of real SQL Server log backups ({len(bodies)} files of "
          f"48-256 KiB, reused), put in {time.perf_counter() - started:.1f} s")
    for latency in args.latency_ms:
        with contextlib.ExitStack() as stack:
            port = stack.enter_context(delayed(endpoint.port, latency / 1000)) if latency else endpoint.port
            compare(f"{endpoint.url.split(':')[0]}://{HOST}:{port}", endpoint.ca_file, args, len(keys), latency)
    with tempfile.TemporaryDirectory(prefix="restoreproof-bench-") as work:
        cold = compare_catalogues(endpoint, client, bodies, args, len(keys), Path(work))
        plan_corpus(client, args.corpus, args.threads, Path(work))
    client.close()
    return cold



def plan_corpus(client: Any, corpus: Path, threads: int, work: Path) -> None:
    """The real corpus laid out as Ola's solution would, planned from S3 (cold, then warm): what the header
    reading cost."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tests.unit.sources.s3_helpers import ola_layout, upload_tree
    from verification.pipeline import plan_source

    layout = ola_layout(corpus)
    upload_tree(client, BUCKET, "corpus", corpus, layout)
    settings = Settings(state_dir=work / "corpus-state", s3=S3Settings(threads=threads))
    for name in ("cold", "warm"):
        started = time.perf_counter()
        _, source, planned = plan_source(settings, f"s3://{BUCKET}/corpus")
        elapsed = time.perf_counter() - started
        assert isinstance(source, S3Source)
        stats = source.stats
        sizes = [source.size(p) for p in source.paths()]
        print(f"the real corpus ({len(sizes)} files, {sum(sizes) / 2**20:.1f} MiB) in Ola's layout, planned from S3 "
              f"({name}) in {elapsed:.2f} s: {len(planned.plans)} databases; {stats.requests['GetObject']} GETs, "
              f"{stats.bytes_read / KiB:,.0f} KiB read ({stats.bytes_read / sum(sizes):.1%} of the bytes), "
              f"{max(stats.bytes_by_path.values(), default=0) / KiB:.1f} KiB at most per object; "
              f"{stats.requests['ListObjectsV2']} list requests")


if __name__ == "__main__":
    main()
