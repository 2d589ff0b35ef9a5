"""restoreproof for Airflow: a hook that reaches restoreproof's settings and results store, a
notifier, and a page in the Airflow UI listing recent runs and their reports. The DAGs run the
pipeline's own steps (verification.orchestration), the same the CLI runs."""
