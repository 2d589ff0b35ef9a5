"""Real clusters with databases that `pg_amcheck --all` would pass by: each made by initdb in a container of
the PostgreSQL image, backed up by real pgBackRest into one repository (a stanza each), with real damage
made in the cluster before its backup, so the restored data holds it.

Damage: the cluster is stopped and bytes in the middle of a heap page of the relation's own file
(pg_relation_filepath) are overwritten, then it is started and backed up. Without data checksums (initdb's
default) nothing but a check of the restored pages can tell. With them, pgBackRest's page checksum
validation flags the backup (restoreproof then plans no restore of it), so a cluster with checksums is
backed up with --no-checksum-page, as some sites run it: the damage then reaches the restored data.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from verification.config import load_settings
from verification.demo.source import DATA, _SourceCluster
from verification.images import ensure_image
from verification.targets.docker import docker_client
from verification.targets.labels import new_run_id

# The heap page overwritten (block 1: the table fills several) and how: 512 bytes of 0xFF from its middle,
# over the headers of the tuples stored there.
BLOCK = 1
PAGE = 8192
DAMAGE = 512


@dataclass(frozen=True)
class Damage:
    database: str
    table: str
    file: str  # relative to the data folder, as PostgreSQL names it (base/<db oid>/<relfilenode>)


class Cluster:
    """A source cluster being made: SQL in any of its databases, damage to one of its tables."""

    def __init__(self, source: _SourceCluster) -> None:
        self.source = source

    def sql(self, database: str, statement: str) -> str:
        # The statement and the database travel in the environment: no shell quoting to get wrong.
        return self.source.sh('psql -X -A -t -q -v ON_ERROR_STOP=1 -h /tmp -d "$DB" -c "$SQL"',
                              env={"DB": database, "SQL": statement}).strip()

    def table(self, database: str, table: str, rows: int = 2000) -> None:
        """A table of a few pages, frozen and on disk (nothing of it left for autovacuum to rewrite)."""
        self.sql(database, f"create table {table} (id int primary key, note text not null)")
        self.sql(database, f"insert into {table} select n, md5(n::text) from generate_series(1, {rows}) n")
        self.sql(database, f"vacuum (freeze, analyze) {table}")
        self.sql(database, "checkpoint")

    def close(self, database: str, template: bool = False) -> None:
        """The database refuses connections (and is a template too), as an operator leaves one."""
        self.sql("postgres", f'alter database "{database}" allow_connections false'
                             + (" is_template true" if template else ""))

    def invalid(self, database: str) -> None:
        """The catalogue state an interrupted DROP DATABASE leaves (datconnlimit = -2, PostgreSQL 15.5 on);
        the interruption itself cannot be timed from outside, its result can be written as it writes it."""
        self.sql("postgres", f"update pg_database set datconnlimit = -2 where datname = '{database}'")

    def no_checksums(self) -> None:
        """The cluster without data checksums (initdb's default): pg_checksums then checks nothing."""
        self.source.sh(f"pg_ctl stop -w -m fast -D {DATA} >/dev/null && pg_checksums --disable -D {DATA} >/dev/null"
                       f" && pg_ctl start -w -D {DATA} -l /var/lib/restoreproof/source.log >/dev/null")

    def damage(self, database: str, table: str) -> Damage:
        file = self.sql(database, f"select pg_relation_filepath('{table}')")
        pages = int(self.sql(database, f"select pg_relation_size('{table}') / {PAGE}"))
        assert pages > BLOCK, f"{table} has {pages} pages"
        offset = BLOCK * PAGE + (PAGE - DAMAGE) // 2
        self.source.sh(f"pg_ctl stop -w -m fast -D {DATA} >/dev/null && "
                       f"head -c {DAMAGE} /dev/zero | tr '\\0' '\\377' | "
                       f"dd of={DATA}/{file} bs=1 seek={offset} conv=notrunc status=none && "
                       f"pg_ctl start -w -D {DATA} -l /var/lib/restoreproof/source.log >/dev/null")
        return Damage(database, table, file)


def make_stanza(repo: Path, stanza: str, build: Callable[[Cluster], object], *backup_options: str) -> object:
    """One cluster made by `build`, backed up (full, with `backup_options`) into `repo` as `stanza`, stopped
    and removed; what `build` returned."""
    settings = load_settings()
    image = ensure_image(settings.docker.postgres_image, settings.docker.build_context)
    client = docker_client()
    source = _SourceCluster(client, image, stanza, repo, new_run_id())
    try:
        source.setup()
        made = build(Cluster(source))
        source.sh(f"pgbackrest --stanza={stanza} --type=full {' '.join(backup_options)} backup")
        source.finish()
        return made
    finally:
        source.remove()
        client.close()
