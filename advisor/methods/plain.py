"""Plain decoding (id ``none``): no drafts, the baseline every speculative gain divides by."""

from __future__ import annotations


class Plain:
    id = "none"
    title = "plain decoding"
    order = 0
    uses_drafter = False

    def vllm_name(self, vf) -> str:
        return ""

    def needs(self, profile, drafter, vf) -> str | None:
        return None

    def ks(self, profile, drafter, *, k_fixed, k_rules, policy, query, vf=None) -> list[int]:
        return []

    def estimate(self, ctx, k, n, context):
        return None

    def tokens_per_seq(self, k: int, vf) -> float:
        return 1.0

    def speculative_config(self, decision, vf) -> dict:
        raise ValueError("plain decoding has no --speculative-config")

    def extra_memory(self, profile, drafter) -> tuple[int, int]:
        return 0, 0


METHOD = Plain()
