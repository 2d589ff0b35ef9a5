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
