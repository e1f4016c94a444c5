"""Helpers that run inside (or start) the vLLM test venv."""
