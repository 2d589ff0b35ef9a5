"""The Airflow DAGs and plugin that ship with the package.

Point Airflow's dags_folder and plugins_folder at these folders (`restoreproof paths dags`,
`restoreproof paths plugins`), or copy them into a deployment's own. Here, dags/ and plugins/ are
symlinks to the repository's top-level folders, the one copy of each; a wheel carries them as files.
"""

from __future__ import annotations

from pathlib import Path

_HERE = Path(__file__).resolve().parent
# Resolved: in a checkout, the top-level folders themselves.
DAGS_DIR = (_HERE / "dags").resolve()
PLUGINS_DIR = (_HERE / "plugins").resolve()
