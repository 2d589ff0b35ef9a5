"""report.json as JUnit XML, so CI systems show each database as a test case that passed, failed or errored."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from datetime import UTC, datetime

from verification.model import BLOCKING_UNREADABLE, UnreadableKind, Verdict
from verification.report_model import DatabaseEntry, PhaseEntry, RunReport

# XML 1.0 cannot carry most control characters, and ElementTree writes them through unescaped, which makes
# the whole file unparseable. Reasons can quote server logs, so such characters are dropped, not trusted.
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _clean(text: object) -> str:
    return _NOT_XML.sub("", str(text))


def _seconds(value: float | None) -> str:
    return f"{value or 0:.3f}"


def _timestamp(value: datetime) -> str:
    # The JUnit schema's timestamp has no zone designator, so it is written in UTC.
    utc = value.astimezone(UTC) if value.tzinfo else value
    return utc.strftime("%Y-%m-%dT%H:%M:%S")


def _number(value: float | None, unit: str, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}{unit}"


def phase_table(phases: list[PhaseEntry]) -> str:
    """The phases as plain text: what was measured next to what the model predicted."""
    rows = [("phase", "status", "measured", "predicted", "error")]
    rows += [(str(p.name), str(p.status), _number(p.seconds, " s"), _number(p.predicted_seconds, " s"),
              _number(p.error_percent, " %", 1)) for p in phases]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    # Names left-aligned, numbers right-aligned so the decimal points line up.
    aligned = (
        [cell.ljust(w) if i < 2 else cell.rjust(w) for i, (cell, w) in enumerate(zip(row, widths, strict=True))]
        for row in rows)
    return "\n".join("  ".join(cells).rstrip() for cells in aligned)


def _database_out(database: DatabaseEntry) -> str:
    lines = [f"{database.database}: {database.verdict}", *(f"- {r}" for r in database.reasons)]
    if database.phases:
        lines += ["", phase_table(database.phases)]
    if database.alerts:
        lines += ["", "drift alerts:", *(f"- {a.message}" for a in database.alerts)]
    return "\n".join(lines)


def _problem(case: ET.Element, tag: str, kind: str, reasons: list[str]) -> None:
    """A <failure> or <error>: the first reason is the one-line message, all of them are the body."""
    first = reasons[0] if reasons else "no reason recorded"
    element = ET.SubElement(case, tag, message=_clean(first), type=kind)
    element.text = _clean("\n".join(reasons) if reasons else first)


def _case(suite: ET.Element, classname: str, name: str, seconds: float | None) -> ET.Element:
    return ET.SubElement(suite, "testcase", classname=classname, name=_clean(name), time=_seconds(seconds))


def render_junit(report: RunReport) -> str:
    """One <testsuite> for the run, one <testcase> per database, not-verified database and corrupt file."""
    engine, source = report.engine, report.source
    classname = f"restoreproof.{engine}"
    root = ET.Element("testsuites")
    suite = ET.SubElement(root, "testsuite", name=_clean(f"restoreproof {engine} {source}"))
    hostname = report.host.get("hostname")
    if hostname:
        suite.set("hostname", _clean(hostname))
    properties = ET.SubElement(suite, "properties")
    for key, value in (("run_id", report.run_id), ("engine", engine), ("source", source)):
        ET.SubElement(properties, "property", name=key, value=_clean(value))

    failures = errors = 0
    case_seconds = 0.0
    for database in report.databases:
        seconds = database.recovery_seconds
        case_seconds += seconds or 0
        case = _case(suite, classname, database.database, seconds)
        if database.verdict is Verdict.FAILED:
            failures += 1
            _problem(case, "failure", "restore-failed", database.reasons)
        elif database.verdict is Verdict.ERROR:
            errors += 1
            _problem(case, "error", "restore-error", database.reasons)
        ET.SubElement(case, "system-out").text = _clean(_database_out(database))

    for skipped in report.not_verified:
        errors += 1
        case = _case(suite, classname, skipped.database, None)
        _problem(case, "error", "not-verified", [skipped.reason])

    # Every backup file that went unread is a case of its own: corrupt ones fail (the backup is
    # bad), unread ones error (restoreproof could not read them), so CI never shows green over them.
    # Files that are not backups, or were excluded on purpose, are listed only.
    listed = []
    for unread in report.unreadable:
        kind = unread.kind
        if kind not in BLOCKING_UNREADABLE:
            listed.append(f"- {unread.path} ({kind}): {unread.reason}")
            continue
        case = _case(suite, classname, unread.path, None)
        if kind is UnreadableKind.CORRUPT:
            failures += 1
            _problem(case, "failure", "corrupt-file", [unread.reason])
        else:
            errors += 1
            _problem(case, "error", f"unread-file ({kind})", [unread.reason])
    if listed:
        ET.SubElement(suite, "system-out").text = _clean("\n".join(["files not read as backups:", *listed]))

    if not report.databases and not report.not_verified:
        errors += 1
        case = _case(suite, classname, "(no database)", None)
        _problem(case, "error", "nothing-verified",
                 ["the run verified no database: the source held none that could be planned, or all were "
                  "left out by the selection; an empty run proves nothing"])

    started, finished = report.started_at, report.finished_at
    duration = (finished - started).total_seconds() if started and finished else case_seconds
    if started:
        suite.set("timestamp", _timestamp(started))
    suite.set("time", _seconds(duration))
    suite.set("tests", str(len(suite.findall("testcase"))))
    suite.set("failures", str(failures))
    suite.set("errors", str(errors))
    suite.set("skipped", "0")
    for attribute in ("tests", "failures", "errors", "time"):
        root.set(attribute, suite.get(attribute, "0"))

    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"
