"""GPU spec table and host fingerprint."""
