from verification.results.store import ResultStore

__all__ = ["ResultStore"]
