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


def _full_k(ctx, sp, k: int, n: int, context: float) -> GainEstimate:
    """Suffix on a line that drafts all K every step (VllmFacts.suffix_drafts_full_k): K̄ from the suffix prediction's
    traffic (the matched continuation, at most 1 + K), R DERIVED from the release's code (advisor.methods._drafted
    full_k_step): the seed-fitted R and P(win) are a CPU proposer's and do not carry over."""
    from advisor.methods import _drafted as dr

    kbar = max(1.0, min(sp.k_bar, 1.0 + k))
    r, notes = dr.full_k_step(ctx.profile, ctx.gpu, ctx.layout, n, context, k)
    spread = max(dr.ACCEPTANCE_SPREAD, getattr(sp, "k_bar_sigma", 0.0))
    return GainEstimate(gain=dr.gain_band(kbar, r, spread), k_bar=kbar, r=r, k_bar_source=getattr(sp, "k_bar_source", None),
                        k_bar_kind=getattr(sp, "k_bar_kind", None),
                        k_bar_published_source_id=getattr(sp, "k_bar_published_source_id", None),
                        notes=[f"suffix on vLLM {ctx.vf.version}: tokens/step {kbar:.2f} at K={k} from the traffic's K̄ "
                               f"(capped at 1 + K); {notes[0]}"])  # fmt: skip


class Suffix:
    id = "suffix"
    title = "suffix decoding"
    order = 2
    uses_drafter = False

    def vllm_name(self, vf) -> str:
        return vllm_method_name(vf, self.id, "suffix")

    def needs(self, profile, drafter, vf) -> str | None:
        return None

    def ks(self, profile, drafter, *, k_fixed, k_rules, policy, query, vf=None) -> list[int]:
        # --k is "num_speculative_tokens when suffix is chosen" (cli/options.py)
        if k_fixed:
            return [k_fixed]
        if vf is not None and vf.suffix_drafts_full_k:  # every K is verified every step: the line's default K and below
            top = vf.suffix_default_num_tokens
            return [top, *(x for x in policy.suffix_full_k_fallback if x < top)]
        return [k_rules, *(x for x in policy.suffix_k_fallback if x < k_rules)]

    def estimate(self, ctx, k, n, context):
        sp = ctx.suffix_at(ctx.layout.tp, n, k)
        if sp is None:
            return None
        if ctx.vf.suffix_drafts_full_k:
            return _full_k(ctx, sp, k, n, context)
        measured = getattr(sp, "measured", None)
        return GainEstimate(gain=Band(value=sp.gain, low=sp.gain_low, high=sp.gain_high), k_bar=max(1.0, sp.k_bar),
                            r=sp.r, p_win=sp.p_win, measured_gain=measured.gain if measured else None,
                            k_bar_source=getattr(sp, "k_bar_source", None), k_bar_kind=getattr(sp, "k_bar_kind", None),
                            k_bar_published_source_id=getattr(sp, "k_bar_published_source_id", None),
                            notes=[FITTED_NOTE])  # fmt: skip

    def tokens_per_seq(self, k: int, vf) -> float:
        return 1.0 + (k if vf.suffix_drafts_full_k else min(k, vf.suffix_draft_cap))

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
