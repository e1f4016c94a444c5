"""Domain errors. The core raises these; the CLI turns them into one-line messages.

Exit codes follow sysexits(3) loosely so scripts can tell failures apart.
"""

from __future__ import annotations


class AdvisorError(Exception):
    """Base class: a failure the user can act on. ``str(err)`` is the whole message."""

    exit_code = 1


class UsageError(AdvisorError):
    """Bad command-line input (values out of range, incompatible options)."""

    exit_code = 2


class ModelNotFoundError(AdvisorError):
    """MODEL could not be resolved to a config.json."""

    exit_code = 3


class ConfigError(AdvisorError):
    """A model config.json that cannot be read or understood."""

    exit_code = 4


class DataError(AdvisorError):
    """A shipped or user data file (rules, GPU table, calibration) is invalid."""

    exit_code = 5


class DependencyError(AdvisorError):
    """An optional dependency (vLLM, Arctic Inference, a tokenizer) is missing."""

    exit_code = 6


class ProbeError(AdvisorError):
    """A probe run could not be carried out."""

    exit_code = 7


class NotBootableError(AdvisorError):
    """The configuration to render is predicted not to boot (``render --force`` renders it anyway)."""

    exit_code = 8


class OutputError(AdvisorError):
    """An output file could not be written (nothing was changed); sysexits EX_CANTCREAT."""

    exit_code = 73
