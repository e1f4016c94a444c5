"""MTP: the checkpoint's own multi-token-prediction layers as the drafter (DeepSeek-V3/R1, GLM-4.5, Qwen3-Next).

Acceptance per draft: the DeepSeek-V3 report's (advisor.predict.absolute.MTP_ACCEPT); the drafter's cost per step:
measured on the host profile suffix's prediction matched, per drafter class (eager where this vLLM runs the MTP
module without torch.compile, ``VllmFacts.mtp_eager_drafters``), advisor.predict.absolute.mtp_gain.
"""

from __future__ import annotations

from advisor.methods.base import GainEstimate, common_config
from advisor.methods.ngram import same_host


class Mtp:
    id = "mtp"
    title = "MTP (the checkpoint's own multi-token-prediction layers)"
    order = 1
    uses_drafter = False

    def vllm_name(self, vf) -> str:
        return vf.mtp_method  # the advisor's name -> this vLLM's

    def needs(self, profile, drafter, vf) -> str | None:
        return None if profile.mtp_layers else "its config has no MTP layers"

    def ks(self, profile, drafter, *, k_fixed, k_rules, policy, query, vf=None) -> list[int]:
        return [profile.mtp_layers] if profile.mtp_layers else []

    def estimate(self, ctx, k, n, context):
        from advisor.predict.absolute import mtp_gain
        from advisor.predict.kbar_prior import PRIOR_K

        sp = ctx.suffix_at(ctx.layout.tp, n, PRIOR_K)  # one host for every method (at the priors' K)
        eager = ctx.profile.model_type in ctx.vf.mtp_eager_drafters
        band, r, notes = mtp_gain(ctx.profile, ctx.gpu, ctx.layout, n, context, k,
                                  build=same_host(sp) if sp is not None else None, eager=eager)  # fmt: skip
        return GainEstimate(gain=band, r=r, k_bar=max(1.0, band.value * r), k_bar_note=notes[0], notes=notes)

    def tokens_per_seq(self, k: int, vf) -> float:
        return 1.0 + k

    def speculative_config(self, decision, vf) -> dict:
        return common_config(decision, self.vllm_name(vf))

    def extra_memory(self, profile, drafter) -> tuple[int, int]:
        """MTP loads its layers (ASSUMED: a decoder layer's share of the weights each)."""
        if not profile.mtp_layers:
            return 0, 0
        return int(profile.weight_bytes * profile.mtp_layers / max(profile.num_layers, 1)), 0


METHOD = Mtp()
