"""The layers of the code, as the README's reading order states them: each imports only those before it.

model -> sources, targets -> engines -> checks, prediction -> pipeline -> cli, orchestration -> dags,
plugins. Read from the source (every import statement, also those inside functions), so a new
import that runs the other way fails here, naming the file and the line.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.conftest import TESTS

ROOT = TESTS.parent
PACKAGE = ROOT / "verification"

# Rank of each part of the package: a part may import only parts of a lower rank.
RANKS = {
    "errors": 0, "model": 0, "__version__": 0, "atomic": 0, "exit_codes": 0,
    "config": 1, "report_model": 1, "restore_points": 1, "interrupts": 1,
    "redaction": 2,
    "sources": 3, "targets": 3, "results": 3, "evidence": 3, "airflow_files": 3,
    "images": 4, "leases": 4,
    "engines": 5, "demo": 5,
    "checks": 6, "prediction": 6, "verdict": 6, "reports": 6,
    "pipeline": 7, "airflow_once": 7, "cli_output": 7,
    "cli": 8, "orchestration": 8,
    "settings_env": 0, "cli_config": 7,
    "phase_events": 0,
    "cli_progress": 7,
}


def part(module: str) -> str:
    """verification.engines.mssql.chain -> engines; verification.pipeline -> pipeline."""
    return module.split(".")[1]


def imports(path: Path) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "verification":
                found += [(node.lineno, f"verification.{alias.name}") for alias in node.names]
            else:
                found.append((node.lineno, node.module))
        elif isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
    return found


def package_files() -> list[Path]:
    # airflow_files holds links to the top-level dags/ and plugins/, checked below as what they are.
    return [p for p in PACKAGE.rglob("*.py") if "airflow_files" not in p.relative_to(PACKAGE).parts[:-1]]


def test_every_part_of_the_package_has_a_rank():
    parts = {p.relative_to(PACKAGE).parts[0].removesuffix(".py") for p in package_files()} - {"__init__"}
    assert parts - set(RANKS) == set(), "a new part of the package: give it its place in RANKS and the README"


@pytest.mark.parametrize("path", package_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_import_runs_against_the_layers(path: Path):
    relative = path.relative_to(PACKAGE)
    if relative.name == "__init__.py" and len(relative.parts) == 1:
        return  # the package itself
    own = relative.parts[0].removesuffix(".py")
    wrong = [f"{path.relative_to(ROOT)}:{line} imports {module} (rank {RANKS[part(module)]} >= {own}'s {RANKS[own]})"
             for line, module in imports(path)
             if module.startswith("verification.") and part(module) != own and RANKS[part(module)] >= RANKS[own]]
    upward = [f"{path.relative_to(ROOT)}:{line} imports {module}" for line, module in imports(path)
              if module.split(".")[0] in ("dags", "restoreproof_airflow", "restoreproof_plugin")]
    assert wrong + upward == []


def test_the_checker_sees_an_import_the_wrong_way(tmp_path):
    bad = tmp_path / "x.py"
    bad.write_text("def f():\n    from verification.pipeline import run_verification\n")
    (line, module), = imports(bad)
    assert (line, part(module)) == (2, "pipeline") and RANKS["pipeline"] > RANKS["engines"]
