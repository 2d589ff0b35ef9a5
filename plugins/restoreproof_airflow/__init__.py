"""restoreproof for Airflow: a hook that talks to restoreproof, operators that do the work, a
notifier, and a page in the Airflow UI listing recent runs and their reports."""
