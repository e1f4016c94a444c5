"""Probe runs of real vLLM on this host: server harness, load generator, metrics, campaigns, and the probe store."""
