"""Backup and restore of what cannot be rebuilt: node keys, session keystores, the services'
databases and the current release (docs/backup.md)."""
