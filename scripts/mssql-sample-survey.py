"""Read every file under a folder with the SQL Server header reader and count what it says.

    .venv/bin/python scripts/mssql-sample-survey.py <folder>

For each file: its backup sets (by the version that wrote them), or why it is not read: natively
compressed (needs a server), a layout the reader does not know (unsupported: an error), or damage
(corrupt: a checksum or a truncation). Used on the public samples that docs/data/sqlserver-public-
samples.tsv lists (fetch them from their repositories at the commits given) and on ../shared/testdata.
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

from verification.engines.mssql.mtf import MtfError, MtfUnsupported, NeedsServerHeaderOnly, read_backup_headers
from verification.sources.base import SourceFile
from verification.sources.local import LocalSource

NOT_SAMPLES = {"MANIFEST.tsv", "RESULTS.tsv", "README.md"}


def survey(root: Path) -> Counter[str]:
    counts: Counter[str] = Counter()
    source = LocalSource(root)
    for path in sorted(p for p in root.rglob("*") if p.is_file() and p.name not in NOT_SAMPLES):
        rel = path.relative_to(root).as_posix()
        try:
            headers = read_backup_headers(SourceFile(source, rel))
        except NeedsServerHeaderOnly:
            counts["files: natively compressed (needs a server)"] += 1
            continue
        except MtfUnsupported as exc:
            counts["files: unsupported"] += 1
            print(f"unsupported: {exc}")
            continue
        except MtfError as exc:
            counts["files: corrupt"] += 1
            print(f"corrupt: {exc}")
            continue
        counts["files: read"] += 1
        counts[f"files of {len(headers)} set(s)"] += 1
        for header in headers:
            counts[f"sets by SQL Server {header.software_version[0]}.{header.software_version[1]}"] += 1
            counts[f"sets copy-only: {header.is_copy_only}"] += 1
    return counts


def main() -> None:
    for line, count in sorted(survey(Path(sys.argv[1])).items()):
        print(f"{count:5d}  {line}")


if __name__ == "__main__":
    main()
