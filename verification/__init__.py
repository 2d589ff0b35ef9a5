"""restoreproof: prove that backups restore, time every phase of the restore, and keep the evidence."""

__version__ = "0.1.0"
