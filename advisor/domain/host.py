"""The host a recommendation is for (filled by :func:`advisor.hardware.resolve.resolve_host`)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from advisor.vllm_facts import DEFAULT_VERSION


class HostContext(BaseModel):
    """GPU model and count plus the host facts rules read."""

    model_config = ConfigDict(extra="forbid")

    gpu: str
    """Short GPU name in the spec table (B200, H200, H100, …)."""
    gpus: int = Field(ge=1)
    """GPUs available to one server."""
    origin: str
    """``command line``, ``detected`` or ``default (no GPU detected)``."""
    dsa_enabled: bool | None = None
    """Whether any Intel DSA work queue is enabled (None: no DSA or not read)."""
    dsa_persisted: bool | None = None
    """Whether the enabled queue set is saved in accel-config (None: no DSA)."""
    notes: list[str] = Field(default_factory=list)
    vllm_version: str = DEFAULT_VERSION
    """The vLLM line the server will run (``--vllm-version`` or detected; advisor.vllm_facts): its
    scheduler defaults and CUDA-graph cap size the memory plan."""
