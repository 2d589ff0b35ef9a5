"""Read the planned archive's last WAL inside the target, for wal_end's proof.

Two commands, each one `bash -c` in the target (a process start per command is what costs there):
`read` fetches the segments with `pgbackrest archive-get` (the repository's copy decompressed and
decrypted, as the server's restore_command got it) and reads each one's system identifier, asks
pg_controldata for the cluster's own and the WAL's geometry, and runs pg_waldump over them, printing
only its last record, the record at the server's end of redo and its error words (a full dump of two
segments is tens of megabytes); `tail` compares a segment with
zeros from where the reader stopped (cmp) and counts the commit records pg_waldump still decodes
after the page it stopped in. Their output is parsed by wal_end.parse_wal_read and parse_tail.
"""

from __future__ import annotations

from collections.abc import Callable

from verification.engines.base import Evidence
from verification.engines.postgres.wal_end import Tail, WalRead, parse_tail, parse_wal_read, waldump_lsn
from verification.targets.base import Target

READ = r"""
dir=$1; data=$2; at=$3; count=$4; shift 4
names=("${@:1:$count}"); shift "$count"
rm -rf "$dir" && mkdir -p "$dir" || { echo "@@fetch-error cannot make $dir"; exit 0; }
for name in "${names[@]}"; do
  out=$("$@" "$name" "$dir/$name" 2>&1) || {
    code=$?; printf '@@fetch-error archive-get of %s exited %s:\n%s\n' "$name" "$code" "$out"; exit 0; }
  # The system identifier in the segment's first page (XLogLongPageHeaderData.xlp_sysid, at byte 24).
  echo "@@fetched $name $(od -A n -t u8 -j 24 -N 8 "$dir/$name" 2>/dev/null | tr -d " ")"
done
# Only the identity and the WAL's geometry (the control file holds a nonce too); all of it when these are
# missing (an error).
geometry='^(Database system identifier|WAL block size|Bytes per WAL segment|Maximum data alignment):'
control=$(pg_controldata -D "$data" 2>&1)
echo "@@control"; printf '%s\n' "$control" | grep -E "$geometry" || printf '%s\n' "$control"
TZ=UTC pg_waldump -p "$dir" "${names[0]}" "${names[-1]}" > "$dir/dump" 2> "$dir/stderr"; echo "@@exit $?"
echo "@@at"; grep -m 1 -F "lsn: $at," "$dir/dump"
echo "@@last"; tail -n 1 "$dir/dump"
echo "@@stderr"; cat "$dir/stderr"; rm -f "$dir/dump"
"""

TAIL = r"""
dir=$1; name=$2; offset=$3; length=$4; resume=$5
out=$(cmp -n "$length" -i "$offset:0" "$dir/$name" /dev/zero 2>&1); echo "@@cmp $?"; printf '%s\n' "$out"
[ -n "$resume" ] || exit 0
count=$(pg_waldump -p "$dir" -s "$resume" "$name" "$name" 2>/dev/null | grep -c 'desc: COMMIT')
echo "@@commits"; echo "$count"
"""


class TargetWalReader:
    """wal_end.WalReader through the target's own commands."""

    def __init__(self, target: Target, archive_get: Callable[[], list[str]], data: str, folder: str,
                 env: dict[str, str], timeout: float, evidence: Evidence) -> None:
        self.target, self.archive_get, self.data, self.folder = target, archive_get, data, folder
        self.env, self.timeout, self.evidence = env, timeout, evidence

    def read(self, segments: list[str], redo_done: int) -> WalRead:
        result = self.target.run(["bash", "-c", READ, "wal-end-read", self.folder, self.data, waldump_lsn(redo_done),
                                  str(len(segments)), *segments, *self.archive_get()],
                                 timeout=self.timeout, env=self.env)
        self.evidence.write("wal-end-read.out", result.output)
        read = parse_wal_read(result.output)
        if not result.ok and read.exit_code is None and read.fetch_error is None:
            read.stderr = f"exit {result.exit_code}: {result.output.strip()[-300:]}"
        return read

    def tail(self, segment: str, offset: int, resume: int, segment_size: int) -> Tail:
        # pg_waldump -s needs a place inside the segment; past its end there is nothing to resume.
        resume_at = waldump_lsn(resume) if resume % segment_size else ""
        result = self.target.run(["bash", "-c", TAIL, "wal-end-tail", self.folder, segment, str(offset),
                                  str(segment_size - offset), resume_at], timeout=self.timeout)
        self.evidence.write("wal-end-tail.out", result.output)
        return parse_tail(result.output)
