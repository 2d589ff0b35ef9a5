"""Discovery of a pgBackRest repository from its own files, checked against `pgbackrest info --output=json`
captured from the same repository."""

import json
from datetime import UTC, datetime

import pytest
from pydantic import SecretStr

from tests.conftest import FIXTURES, LABELS
from tests.unit.engines.postgres.segsize import upgraded
from verification.engines.postgres.cipher import PassphraseMissingError, WrongPassphraseError
from verification.engines.postgres.repository import discover, find_stanzas, unrecognised_files
from verification.engines.postgres.wal import parse_segment
from verification.errors import ConfigError, SourceError
from verification.model import BackupType
from verification.sources import LocalSource

MB16 = 16 * 1024 * 1024


def test_backups_match_what_pgbackrest_info_reports(captured_repo):
    (stanza,) = discover(LocalSource(captured_repo), MB16)
    info = json.loads((FIXTURES / "pgbackrest-info.json").read_text())[0]
    assert stanza.name == info["name"] == "demo1"
    assert stanza.db_version == "15"
    assert stanza.system_id == info["db"][0]["system-id"]
    assert [b.label for b in stanza.backups] == [b["label"] for b in info["backup"]] == LABELS
    for mine, theirs in zip(stanza.backups, info["backup"], strict=True):
        assert str(mine.type) == theirs["type"]
        assert mine.start == datetime.fromtimestamp(theirs["timestamp"]["start"], UTC)
        assert mine.finish == datetime.fromtimestamp(theirs["timestamp"]["stop"], UTC)
        assert mine.size_bytes == theirs["info"]["size"]
        assert mine.repo_size_bytes == theirs["info"]["repository"]["size"]
        assert list(mine.references) == (theirs["reference"] or [])
        assert (mine.start_wal, mine.stop_wal) == (theirs["archive"]["start"], theirs["archive"]["stop"])
        assert (mine.start_lsn, mine.stop_lsn) == (theirs["lsn"]["start"], theirs["lsn"]["stop"])
    assert [b.type for b in stanza.backups] == [BackupType.FULL, BackupType.DIFF, BackupType.INCR]


def test_archive_lists_segments_but_not_backup_history_files(captured_repo):
    (stanza,) = discover(LocalSource(captured_repo), MB16)
    archive = stanza.archives["15-1"]
    names = sorted(s.name(MB16) for s in archive.segments)
    assert names[0] == "000000010000000000000001"
    assert names[-1] == "00000001000000000000000A"
    assert len(names) == 10  # the three *.backup files are not segments
    seg = archive.segments[parse_segment("000000010000000000000004", MB16)]
    assert seg.file.endswith("000000010000000000000004-4886679f65586e32c5d5e075c99513323dc736d5.gz")


def test_falls_back_to_the_copy_when_backup_info_is_damaged(captured_repo):
    (captured_repo / "backup/demo1/backup.info").write_text("garbage without sections")
    (stanza,) = discover(LocalSource(captured_repo), MB16)
    assert len(stanza.backups) == 3


def test_both_info_files_unusable_names_them(captured_repo):
    for name in ("backup.info", "backup.info.copy"):
        (captured_repo / "backup/demo1" / name).write_text("[backrest]\n[backup:current]\nX={not json\n[db]\n")
    with pytest.raises(SourceError, match=r"backup/demo1/backup.info.*not valid JSON"):
        discover(LocalSource(captured_repo), MB16)


def test_a_folder_that_is_not_a_repository_says_so(tmp_path):
    (tmp_path / "something.txt").write_text("hello")
    with pytest.raises(SourceError, match="not a pgBackRest repository: it has no backup/ folder"):
        find_stanzas(LocalSource(tmp_path))
    (tmp_path / "backup" / "x").mkdir(parents=True)
    with pytest.raises(SourceError, match=r"no backup/<stanza>/backup\.info found"):
        find_stanzas(LocalSource(tmp_path))


def test_missing_source_folder_is_named(tmp_path):
    with pytest.raises(SourceError, match=f"{tmp_path}/nope does not exist"):
        LocalSource(tmp_path / "nope")


# -- encrypted repositories (conftest.encrypted_repo: made by the real pgBackRest 2.45 at test time) ------------


def damage_padding(path) -> None:  # type: ignore[no-untyped-def]
    """Flip the byte of the last-but-one block that sets the padding's length: never decrypts (test_cipher)."""
    data = bytearray(path.read_bytes())
    data[-17] ^= 0xF0
    path.write_bytes(bytes(data))


def test_an_encrypted_stanza_is_read_with_its_passphrase(encrypted_repo):
    (stanza,) = discover(LocalSource(encrypted_repo.path), MB16, SecretStr(encrypted_repo.passphrase))
    assert stanza.cipher == "aes-256-cbc"
    assert [b.label for b in stanza.backups] == encrypted_repo.backup_labels()
    assert [str(b.type) for b in stanza.backups] == ["full", "incr"]
    archive = stanza.archives["15-1"]
    # The timeline history file pgBackRest pushed, decrypted with archive.info's own key.
    assert [(s.parent, s.switch_lsn) for s in archive.histories[2]] == [(1, 0x9000000)]
    assert archive.unrecognised == []


def test_a_plain_repository_is_read_as_plain_whatever_passphrase_is_given(captured_repo):
    (stanza,) = discover(LocalSource(captured_repo), MB16, SecretStr("Not-Used-Pass-123"))
    assert stanza.cipher is None and len(stanza.backups) == 3


def test_no_passphrase_for_an_encrypted_repository_names_the_setting_and_the_file(encrypted_repo):
    with pytest.raises(PassphraseMissingError) as raised:
        discover(LocalSource(encrypted_repo.path), MB16)
    message = str(raised.value)
    assert message.startswith("encrypted repository (aes-256-cbc): set postgres.repo_cipher_pass (")
    assert f"stanza crypt1: {encrypted_repo.path}/backup/crypt1/backup.info is encrypted" in message
    assert isinstance(raised.value, ConfigError)  # exit 2, before anything starts


def test_a_wrong_passphrase_is_said_naming_the_file_it_failed_on(encrypted_repo):
    with pytest.raises(WrongPassphraseError) as raised:
        discover(LocalSource(encrypted_repo.path), MB16, SecretStr(encrypted_repo.passphrase + "-wrong"))
    message = str(raised.value)
    assert message.startswith("wrong passphrase: postgres.repo_cipher_pass does not decrypt backup/crypt1/backup.info "
                              f"of the encrypted repository (aes-256-cbc) at {encrypted_repo.path}, nor "
                              "backup/crypt1/backup.info.copy, archive/crypt1/archive.info, "
                              "archive/crypt1/archive.info.copy")
    assert encrypted_repo.passphrase not in message


def test_damaged_backup_info_and_copy_are_damage_not_a_wrong_passphrase(encrypted_copy):
    # archive.info still opens with the passphrase: it is right, and backup.info is what is wrong.
    for name in ("backup.info", "backup.info.copy"):
        damage_padding(encrypted_copy.path / "backup/crypt1" / name)
    with pytest.raises(SourceError) as raised:
        discover(LocalSource(encrypted_copy.path), MB16, SecretStr(encrypted_copy.passphrase))
    assert not isinstance(raised.value, ConfigError)
    assert "no usable pgBackRest info file at" in str(raised.value)
    assert "backup/crypt1/backup.info: does not decrypt (the padding is not valid)" in str(raised.value)
    assert "backup/crypt1/backup.info.copy: does not decrypt" in str(raised.value)


def test_a_damaged_backup_info_falls_back_to_its_decrypted_copy(encrypted_copy):
    damage_padding(encrypted_copy.path / "backup/crypt1/backup.info")
    (stanza,) = discover(LocalSource(encrypted_copy.path), MB16, SecretStr(encrypted_copy.passphrase))
    assert stanza.info_file == "backup/crypt1/backup.info.copy" and len(stanza.backups) == 2


def test_a_damaged_encrypted_history_file_is_named(encrypted_copy):
    history = encrypted_copy.path / "archive/crypt1/15-1/00000002.history"
    damage_padding(history)
    with pytest.raises(SourceError, match=r"timeline history file archive/crypt1/15-1/00000002.history does not "
                                          r"decrypt with the key archive.info keeps"):
        discover(LocalSource(encrypted_copy.path), MB16, SecretStr(encrypted_copy.passphrase))


def test_the_stanzas_cluster_is_identified_by_backup_infos_db_system_id(captured_repo):
    from dataclasses import replace

    from verification.engines.postgres.repository import system_identifier
    from verification.model import SystemIdentifier

    (stanza,) = discover(LocalSource(captured_repo), MB16)
    assert system_identifier(stanza) == SystemIdentifier("7711085630144012330",
                                                         "backup/demo1/backup.info [db] db-system-id")
    assert system_identifier(replace(stanza, system_id=0)) is None  # backup.info recorded none


def test_a_plan_carries_its_clusters_identifier(captured_repo):
    from verification.config import Settings
    from verification.engines.postgres.engine import PostgresEngine

    (plan,) = PostgresEngine(Settings()).plan(LocalSource(captured_repo), None).plans
    assert plan.system_id is not None and plan.system_id.value == "7711085630144012330"


def test_a_segment_name_out_of_range_for_its_clusters_proven_size_says_so(tmp_path):
    # A stanza upgraded from a 64 MiB cluster (15-1) into a 1 MiB one (15-2): segment part 0x40 is a
    # name of the 1 MiB cluster, and no name the 64 MiB one (64 segments per log) archives.
    upgraded(tmp_path, "seg64", "seg1")
    name = "000000010000000000000040-0123456789abcdef0123456789abcdef01234567.gz"
    for archive_id in ("15-1", "15-2"):
        (tmp_path / "archive/up" / archive_id / "0000000100000000" / name).write_bytes(b"")
    source = LocalSource(tmp_path)
    (stanza,) = discover(source, MB16)
    assert parse_segment(name[:24], 1024 * 1024) in stanza.archives["15-2"].segments
    ((path, why),) = unrecognised_files(source, stanza)
    assert path == f"archive/up/15-1/0000000100000000/{name}"
    assert why.startswith("WAL segment name 000000010000000000000040 is out of range for archive 15-1, whose "
                          "cluster's segments are 67108864 bytes (64 MiB) (67108864 bytes (64 MiB), from the backups: "
                          "the only size that fits 4 WAL position(s)")
    assert why.endswith("): not a segment that cluster archived")
