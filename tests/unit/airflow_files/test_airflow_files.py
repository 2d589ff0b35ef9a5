"""The DAGs and the plugin ship with the package; in a checkout they are the top-level folders."""

from pathlib import Path

from verification.airflow_files import DAGS_DIR, PLUGINS_DIR

ROOT = Path(__file__).resolve().parents[3]


def test_in_a_checkout_they_are_the_top_level_folders():
    assert DAGS_DIR == ROOT / "dags"
    assert PLUGINS_DIR == ROOT / "plugins"


def test_they_hold_the_dags_and_the_plugin():
    assert sorted(p.name for p in DAGS_DIR.glob("*.py")) == ["restore_verification.py", "rto_drift.py"]
    assert (PLUGINS_DIR / "restoreproof_plugin.py").is_file()
    assert (PLUGINS_DIR / "restoreproof_airflow" / "__init__.py").is_file()
