"""Per-module mutation score from mutmut's results: made, killed, survived, equivalent, score.

    .venv/bin/python scripts/mutation_report.py [--min-score 90]

Reads `mutmut results --all true` (run from the project root after `mutmut run`). Mutants listed in
mutation-equivalents.md (one name per line, after a `- ` and before ` — the reason`) cannot change
behaviour and are counted apart, not as survivors. Exits 1 when the total score is under
--min-score, so `make mutation` fails rather than prints a number nobody reads.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path

LINE = re.compile(r"^\s+(?P<name>[\w.ǁ]+): (?P<status>.+)$")
EQUIVALENT = re.compile(r"^- `?(?P<name>[\w.ǁ]+)`?\s+—")
KILLED = {"killed", "timeout"}  # a mutant that hangs the tests is caught by them too


def module_of(name: str) -> str:
    return re.split(r"\.x(?:_|ǁ)", name, maxsplit=1)[0]


def equivalents(path: Path) -> set[str]:
    if not path.exists():
        return set()
    return {m["name"] for line in path.read_text(encoding="utf-8").splitlines() if (m := EQUIVALENT.match(line))}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--min-score", type=float, default=90.0)
    parser.add_argument("--equivalents", type=Path, default=Path("mutation-equivalents.md"))
    args = parser.parse_args()
    listing = subprocess.run([sys.executable, "-m", "mutmut", "results", "--all", "true"], capture_output=True,
                             text=True, check=True).stdout
    known = equivalents(args.equivalents)
    counts: dict[str, Counter[str]] = defaultdict(Counter)
    survivors: list[str] = []
    for line in listing.splitlines():
        if not (match := LINE.match(line)):
            continue
        name, status = match["name"], match["status"].strip()
        kind = "equivalent" if name in known and status not in KILLED else (
            "killed" if status in KILLED else "survived" if status == "survived" else status)
        counts[module_of(name)][kind] += 1
        if kind not in ("killed", "equivalent"):
            survivors.append(f"{name}: {status}")
    if not counts:
        print("no mutants found: run `mutmut run` first", file=sys.stderr)
        return 2
    print(f"{'module':55} {'made':>5} {'killed':>6} {'surv.':>5} {'equiv.':>6} {'other':>5} {'score':>6}")
    total: Counter[str] = Counter()
    for module in sorted(counts):
        c = counts[module]
        total.update(c)
        print(_row(module, c))
    print(_row("total", total))
    score = _score(total)
    if survivors:
        print(f"\n{len(survivors)} mutant(s) not killed (`mutmut show NAME` shows one):")
        print("\n".join(f"  {s}" for s in survivors))
    print(f"\nscore {score:.1f}% (target {args.min_score:.0f}%): killed / (made - equivalent)")
    return 0 if score >= args.min_score else 1


def _score(c: Counter[str]) -> float:
    judged = sum(c.values()) - c["equivalent"]
    return 100.0 * c["killed"] / judged if judged else 0.0


def _row(module: str, c: Counter[str]) -> str:
    other = sum(c.values()) - c["killed"] - c["survived"] - c["equivalent"]
    return (f"{module:55} {sum(c.values()):5d} {c['killed']:6d} {c['survived']:5d} {c['equivalent']:6d} "
            f"{other:5d} {_score(c):5.1f}%")


if __name__ == "__main__":
    sys.exit(main())
