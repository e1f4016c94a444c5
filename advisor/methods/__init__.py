"""Speculative methods, one module each, behind one protocol (:class:`advisor.methods.base.SpecMethod`).

Every module in this package (other than ``base``) that defines ``METHOD`` is a method; :func:`get` and
:func:`all_methods` find them with ``pkgutil``, so a new method is a new module here plus its ``method`` name in
each vLLM line's facts (``VllmFacts.spec_methods``) — nothing else names it (tests/test_method_interface.py adds
one that way). Floor 4: methods price themselves with advisor.predict and are read by plan, render and probe.
"""

from __future__ import annotations

import importlib
import pkgutil

from advisor.methods.base import GainEstimate, MethodContext, SpecMethod

__all__ = ["GainEstimate", "MethodContext", "SpecMethod", "all_methods", "get", "ids", "speculative_config", "UnknownMethod"]

_LOADED: dict = {}
"""method id -> method, and the ``__path__`` they were found on (key ``__path__``)."""


class UnknownMethod(ValueError):
    """A method id no module of advisor.methods defines."""


def _load() -> dict[str, SpecMethod]:
    """The methods, found once per ``__path__`` (a test may add a folder to it; nothing else rescans the disk)."""
    key = tuple(__path__)
    if _LOADED.get("__path__") == key:
        return {k: v for k, v in _LOADED.items() if k != "__path__"}
    _LOADED.clear()
    for name in sorted({n for _, n, _ in pkgutil.iter_modules(__path__)} - {"base"}):
        method = getattr(importlib.import_module(f"{__name__}.{name}"), "METHOD", None)
        if method is None:
            continue
        if not isinstance(method, SpecMethod):
            raise TypeError(f"advisor.methods.{name}.METHOD does not satisfy advisor.methods.base.SpecMethod")
        _LOADED[method.id] = method
    _LOADED["__path__"] = key
    return {k: v for k, v in _LOADED.items() if k != "__path__"}


def all_methods() -> list[SpecMethod]:
    """Every method, plain (``none``) first, in their declared order."""
    return sorted(_load().values(), key=lambda m: (m.order, m.id))


def ids() -> tuple[str, ...]:
    """Every method id, plain first."""
    return tuple(m.id for m in all_methods())


def get(method_id: str) -> SpecMethod:
    """The method ``method_id``; UnknownMethod naming the known ones otherwise."""
    methods = _load()
    if method_id not in methods:
        raise UnknownMethod(f"unknown speculative method {method_id!r}; known: {', '.join(ids())}")
    return methods[method_id]


def speculative_config(decision, vf) -> dict | None:
    """The ``--speculative-config`` object of ``decision`` on vLLM line ``vf`` (None: plain decoding)."""
    if decision.speculative_method is None:
        return None
    method = get(decision.speculative_method)
    if method.vllm_name(vf) not in vf.spec_methods:
        raise UnknownMethod(f"speculative method {decision.speculative_method!r} ({method.vllm_name(vf)!r}) is not one vLLM "
                            f"{vf.version} has (its SpeculativeConfig methods: {', '.join(vf.spec_methods)}); pick another "
                            "--vllm-version or method")
    return method.speculative_config(decision, vf)
