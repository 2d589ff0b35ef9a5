"""Throughput and connect time of the loopback relay into a network-less container.

    .venv/bin/python bench/relay.py [--rows 2000] [--repeat 5]

Starts a labelled container from restoreproof/postgres:15 with no network, a server on 127.0.0.1
inside it, then through the relay (verification/targets/relay.py), with psycopg:
- connect: median seconds to open a connection and run `select 1`, over 20;
- large query: `select repeat(md5(g::text), 1000) from generate_series(1, ROWS) g` (32,000 bytes a
  row), median MB/s of the rows' bytes over --repeat runs;
and two baselines for the same rows: `psql` inside the container writing to /dev/null (the server and
client alone, no transport), and `psql` through the docker CLI's `docker exec` (the engine's attach
stream, the transport the relay rides, demultiplexed by the CLI), bytes counted here.
The container is removed at the end, also on failure, Ctrl-C or SIGTERM.
"""

from __future__ import annotations

import argparse
import secrets
import signal
import statistics
import subprocess
import sys
import time

import psycopg

from verification.targets.docker import docker_client, run_in_container
from verification.targets.labels import ROLE_LABEL, RUN_LABEL
from verification.targets.relay import Relay

IMAGE = "restoreproof/postgres:15"
START = ('initdb -D /tmp/d -A trust >/dev/null '
         '&& pg_ctl -D /tmp/d -o "-c listen_addresses=127.0.0.1" -l /tmp/l -w start >/dev/null')


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))   # so the container is removed
    query = f"select repeat(md5(g::text), 1000) from generate_series(1, {args.rows}) g"
    client = docker_client()
    run = f"bench-relay-{secrets.token_hex(3)}"
    container = client.containers.create(IMAGE, ["sleep", "infinity"], name=f"restoreproof-{run}",
                                         network_mode="none", labels={RUN_LABEL: run, ROLE_LABEL: "bench"})
    try:
        container.start()
        started = run_in_container(client, container, ["bash", "-c", START], timeout=120, user="postgres")
        if not started.ok:
            raise SystemExit(f"the server did not start: {started.output}")
        with Relay(client, container, 5432) as relay:
            def connect() -> psycopg.Connection[tuple[object, ...]]:
                return psycopg.connect(host=relay.host, port=relay.port, user="postgres", dbname="postgres")

            connects = []
            for _ in range(20):
                begin = time.perf_counter()
                with connect() as conn:
                    conn.execute("select 1").fetchone()
                connects.append(time.perf_counter() - begin)
            rates = []
            with connect() as conn:
                for _ in range(args.repeat):
                    begin = time.perf_counter()
                    size = sum(len(str(value)) for value, in conn.execute(query).fetchall())
                    rates.append(size / (time.perf_counter() - begin) / 1e6)
        inside, cli = [], []
        psql = ["psql", "-h", "127.0.0.1", "-Atc", query]
        for _ in range(args.repeat):
            begin = time.perf_counter()
            result = run_in_container(client, container, ["bash", "-c", '"$@" >/dev/null', "psql", *psql],
                                      timeout=300, user="postgres")
            if not result.ok:
                raise SystemExit(f"psql failed inside: {result.output}")
            inside.append(size / (time.perf_counter() - begin) / 1e6)
            begin = time.perf_counter()
            with subprocess.Popen(["docker", "exec", "-u", "postgres", container.id, *psql],
                                  stdout=subprocess.PIPE) as process:
                received = 0
                while chunk := process.stdout.read(1 << 20) if process.stdout else b"":
                    received += len(chunk)
            cli.append(received / (time.perf_counter() - begin) / 1e6)
        print(f"rows {args.rows} ({size / 1e6:.1f} MB a query), {args.repeat} runs")
        print(f"relay connect + select 1: median {statistics.median(connects) * 1000:.0f} ms over 20")
        print(f"relay large query: median {statistics.median(rates):.0f} MB/s "
              f"(min {min(rates):.0f}, max {max(rates):.0f})")
        for name, values in (("baseline psql inside, to /dev/null", inside),
                             ("baseline psql through the docker CLI's exec", cli)):
            print(f"{name}: median {statistics.median(values):.0f} MB/s "
                  f"(min {min(values):.0f}, max {max(values):.0f})")
    finally:
        container.remove(force=True)
        client.close()


if __name__ == "__main__":
    main()
