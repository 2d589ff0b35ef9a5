"""Errors restoreproof raises on purpose. Each names the thing (file, folder, backup) and what is wrong."""

from __future__ import annotations


class RestoreproofError(Exception):
    """Base class: restoreproof could not do what it was asked (exit code 2)."""


class SourceError(RestoreproofError):
    """The source is missing, unreadable, or not a backup repository of the chosen engine."""


class SourcePermissionError(SourceError):
    """A file or folder of the source that restoreproof's user may not read: an operator's fix (access),
    never a sign of damage, and never a reason to take the source for another engine's."""

    def __init__(self, message: str, path: str) -> None:
        super().__init__(message)
        self.path = path


class ConfigError(RestoreproofError):
    """The configuration file or environment is invalid."""


class TargetError(RestoreproofError):
    """A disposable target could not be provisioned or driven (restoreproof's own infrastructure)."""


class EngineUnavailableError(TargetError):
    """The Docker engine does not answer, or failed in itself (restarting, shutting down): what was asked
    of it may succeed once it is back."""


class ImageMissingError(TargetError):
    """The target image is not present locally and could not be built."""


class StoreVersionError(RestoreproofError):
    """The results store's schema is at a revision this restoreproof does not know (a newer one made it)."""


class StoreUnavailableError(RestoreproofError):
    """The results store did not answer within its retries (results_retry): named with its URL, the
    password masked, and the last error."""


class StaleDiscoveryError(RestoreproofError):
    """A step of a run whose discovery has since been made again (a scheduler's task cleared): what it
    did belongs to plans that are no longer the run's, so it records nothing."""


class RunFinishedError(RestoreproofError):
    """A step recording into a run that has already finished (published, or closed by another worker's
    sweep that took this worker for dead): the run's report is out, so nothing more is recorded in it."""


class ArchivedObjectError(SourceError):
    """An object in an archive storage class (S3 Glacier Flexible Retrieval, Glacier Deep Archive, an
    Intelligent-Tiering archive tier) that is not restored, or whose restore is still in progress:
    nothing can read it until it is restored. Never "access denied", never a damaged backup: the
    run cannot pass, and cannot fail on it either."""

    def __init__(self, message: str, storage_class: str | None) -> None:
        super().__init__(message)
        self.storage_class = storage_class


class ReportError(RestoreproofError):
    """A report file (a page, the folder's shared plotly.js) could not be written."""
