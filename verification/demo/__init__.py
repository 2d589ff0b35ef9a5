"""Sample backups to verify: the demo's source clusters."""
