"""Offline K̄ estimation: replay recorded traffic through vLLM's suffix-decoding cache on the CPU.

``estimate_kbar(path, tokenizer, k, ...) -> KbarResult`` is the entry point (``advisor kbar`` and
the predictor call it). Modules: ``formats`` (trace readers), ``tokenize`` (tokenizer loading),
``replay`` (the simulation, pure), ``stats`` (figures and bootstrap), ``estimate`` (the pipeline).
Importing this package loads none of transformers, rich or arctic_inference.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from advisor.kbar.estimate import KbarResult, estimate_kbar

__all__ = ["KbarResult", "estimate_kbar"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from advisor.kbar import estimate

        return getattr(estimate, name)
    raise AttributeError(name)
