"""The results store's schema as Alembic migrations, run from the code: no alembic.ini at run time.

Every ResultStore brings its database to the newest revision when it opens it. A store made before
the migrations existed (restoreproof 0.1.0 created its tables directly, so it has them and no
version table) is stamped at BASELINE, whose schema is exactly that release's, then
upgraded: nothing is re-created, no row is lost. A store at a revision this code does not know
(a newer restoreproof made it) is refused with a StoreVersionError rather than guessed at.

Several processes may open one fresh store at the same moment (an Airflow run's tasks do): the
upgrade runs in one transaction that only one of them can hold at a time (SQLite: BEGIN IMMEDIATE;
PostgreSQL: a transaction-scoped advisory lock), and whoever gets it second finds the work done.

A new revision, next to the others (then review what autogenerate wrote):
    python -c "from verification.results.migrations import new_revision; new_revision('0003', 'what and why')"
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import create_engine, event, inspect, text
from sqlalchemy.engine import URL, Connection, Engine
from sqlalchemy.pool import NullPool

from verification.errors import StoreVersionError
from verification.redaction import MASK

FOLDER = Path(__file__).parent
# The schema restoreproof 0.1.0 made with create_all, table for table.
BASELINE = "0001"
BASELINE_TABLES = frozenset({"runs", "databases", "chains", "phases", "checks", "database_reports"})
# Our own name for Alembic's version table: a team may keep the store in a PostgreSQL database that
# another Alembic user (Airflow's metadata) shares, whose `alembic_version` must never be read as ours.
VERSION_TABLE = "restoreproof_schema_version"
# Any constant of our own: the PostgreSQL advisory lock that serialises migrations of one database.
POSTGRES_LOCK_KEY = 0x7265_7374_6F72_65  # "restore"
# How long a process waits for another one's migration (SQLite's busy timeout, in seconds).
SQLITE_LOCK_SECONDS = 120.0


def config(connection: Connection | None = None) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(FOLDER))
    # Revision files named r0001_..., importable module names (mypy checks them with the package).
    cfg.set_main_option("file_template", "r%%(rev)s_%%(slug)s")
    cfg.attributes["connection"] = connection
    return cfg


@functools.cache
def scripts() -> ScriptDirectory:
    return ScriptDirectory.from_config(config())


def head() -> str:
    revision = scripts().get_current_head()
    assert revision is not None, "the migrations folder has no revision"
    return revision


def current(connection: Connection) -> tuple[str, ...]:
    """The store's revisions as its version table says; () when it has none."""
    return tuple(MigrationContext.configure(connection, opts={"version_table": VERSION_TABLE}).get_current_heads())


def masked(url: URL) -> str:
    """The URL as it can be shown: the password replaced with the mask reports use."""
    # SQLAlchemy writes "***" for a password (a mask set as the password would come out URL-encoded).
    return url.render_as_string(hide_password=True).replace(":***@", f":{MASK}@", 1)


def upgrade(engine: Engine) -> None:
    """Bring the store to the newest revision (a no-op, without locking, when it is there already)."""
    with _alembic_says_only_warnings():
        with engine.connect() as connection:
            if current(connection) == (head(),):
                return
        with _exclusive(engine) as connection:
            _upgrade(connection, engine.url)


@contextmanager
def _alembic_says_only_warnings() -> Iterator[None]:
    """Alembic logs two INFO lines each time a store is opened ("Context impl ...") and one per step:
    in a host that logs INFO (an Airflow task) they would bury the task's own lines. Only ours are
    quietened, for as long as we run, so Airflow's own migrations still say what they do."""
    logger = logging.getLogger("alembic.runtime.migration")
    level = logger.level
    logger.setLevel(max(level, logging.WARNING))
    try:
        yield
    finally:
        logger.setLevel(level)


def _upgrade(connection: Connection, url: URL) -> None:
    revisions = current(connection)  # read again: another process may have upgraded it meanwhile
    known = {script.revision for script in scripts().walk_revisions()}
    if unknown := [r for r in revisions if r not in known]:
        raise StoreVersionError(
            f"the results store {masked(url)} is at schema revision {', '.join(unknown)}, which this "
            f"restoreproof does not know (its newest is {head()}): a newer restoreproof made it, or it is "
            f"not a restoreproof results store; upgrade restoreproof or set results_url to another store")
    cfg = config(connection)
    if not revisions and set(inspect(connection).get_table_names()) >= BASELINE_TABLES:
        command.stamp(cfg, BASELINE)  # made by restoreproof 0.1.0: its tables are BASELINE's
    command.upgrade(cfg, "head")


@contextmanager
def _exclusive(engine: Engine) -> Iterator[Connection]:
    """A connection in a transaction that no other process can be migrating this store in."""
    if engine.dialect.name != "sqlite" or engine.url.database in (None, "", ":memory:"):
        with engine.begin() as connection:
            if engine.dialect.name == "postgresql":
                connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": POSTGRES_LOCK_KEY})
            yield connection
        return
    # pysqlite starts no transaction before DDL and its BEGIN is deferred (no lock until the first
    # write, when two processes can both have read "no tables"): the documented recipe is to take
    # over BEGIN, here as BEGIN IMMEDIATE, the write lock at once, waited for up to the busy timeout.
    locking = create_engine(engine.url, poolclass=NullPool, connect_args={"timeout": SQLITE_LOCK_SECONDS})
    event.listen(locking, "connect", _no_implicit_transactions)
    event.listen(locking, "begin", _begin_immediate)
    try:
        with locking.begin() as connection:
            yield connection
    finally:
        locking.dispose()


def _no_implicit_transactions(dbapi_connection: Any, _record: Any) -> None:
    dbapi_connection.isolation_level = None


def _begin_immediate(connection: Connection) -> None:
    connection.exec_driver_sql("BEGIN IMMEDIATE")


def new_revision(rev_id: str, message: str, url: str = "sqlite://") -> None:
    """Write a new revision file, autogenerated from the ORM against `url` brought to head first."""
    engine = create_engine(url)
    try:
        upgrade(engine)
        with engine.begin() as connection:
            command.revision(config(connection), message=message, rev_id=rev_id, autogenerate=True)
    finally:
        engine.dispose()
