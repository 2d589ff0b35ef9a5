"""Where backups live. Engines read repositories only through a `Source`, so object storage can
serve the same discovery code as a local folder."""

from verification.sources.base import Source
from verification.sources.local import LocalSource

__all__ = ["LocalSource", "Source"]
