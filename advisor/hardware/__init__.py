"""GPU spec table, host reading (nvidia-smi, sysfs, DSA), the host fingerprint and resolve_host."""
