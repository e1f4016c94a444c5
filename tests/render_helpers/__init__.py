"""Helpers for the rendering tests: the hostile corpus, a recording fake vllm, systemd unit parsing."""
