"""Predicted restore times, calibration and drift (the drift trend is used by the rto_drift DAG)."""
