"""Rendering: flag mapping per vLLM version, quoting, Jinja2 templates."""
