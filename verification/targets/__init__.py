"""Disposable targets: Docker containers or local processes, labelled for the reaper."""
