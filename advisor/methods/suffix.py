"""Suffix decoding (Arctic Inference's suffix trees, vLLM's ``method="suffix"``).

K̄ and R come from the calibrated K > R predictor (advisor.predict: fitted on the seed sweep plus this host's
probes, the speculative step's cost from the host profile, calibration/host_profiles.csv), asked at the candidate's
own TP, running sequences and K (``MethodContext.suffix_at``). Drafts are of varying length (0 where the tree has
no match), capped at ``VllmFacts.suffix_draft_cap`` tokens per sequence on lines that draft up to the match.
"""

from __future__ import annotations

from advisor.domain.prediction import Band
from advisor.methods.base import GainEstimate, common_config, vllm_method_name

FITTED_NOTE = ("suffix gain: K > R predictor FITTED on the seed sweep (+ this host's probes), speculative-step cost "
               "from the host profile (calibration/host_profiles.csv)")  # fmt: skip


class Suffix:
    id = "suffix"
    title = "suffix decoding"
    order = 2
    uses_drafter = False

    def vllm_name(self, vf) -> str:
        return vllm_method_name(vf, self.id, "suffix")

    def needs(self, profile, drafter, vf) -> str | None:
        return None

    def ks(self, profile, drafter, *, k_fixed, k_rules, policy, query) -> list[int]:
        # --k is "num_speculative_tokens when suffix is chosen" (cli/options.py)
        return [k_fixed] if k_fixed else [k_rules, *(x for x in policy.suffix_k_fallback if x < k_rules)]

    def estimate(self, ctx, k, n, context):
        sp = ctx.suffix_at(ctx.layout.tp, n, k)
        if sp is None:
            return None
        measured = getattr(sp, "measured", None)
        return GainEstimate(gain=Band(value=sp.gain, low=sp.gain_low, high=sp.gain_high), k_bar=max(1.0, sp.k_bar),
                            r=sp.r, p_win=sp.p_win, measured_gain=measured.gain if measured else None,
                            k_bar_source=getattr(sp, "k_bar_source", None), notes=[FITTED_NOTE])  # fmt: skip

    def tokens_per_seq(self, k: int, vf) -> float:
        return 1.0 + min(k, vf.suffix_draft_cap)

    def speculative_config(self, decision, vf) -> dict:
        from advisor.domain.decision import SuffixParams

        cfg = common_config(decision, self.vllm_name(vf))
        defaults = SuffixParams()
        read = getattr(vf, "suffix_tuning_knobs", None)
        for name in SuffixParams.model_fields:
            value = getattr(decision.suffix, name)
            if value != getattr(defaults, name) and (read is None or f"suffix_decoding_{name}" in read):
                cfg[f"suffix_decoding_{name}"] = value
        return cfg

    def extra_memory(self, profile, drafter) -> tuple[int, int]:
        return 0, 0


METHOD = Suffix()
