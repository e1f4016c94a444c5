"""n-gram prompt lookup (vLLM's CPU ``method="ngram"``): drafts the K tokens that followed the last match of the
sequence's own recent n-gram in its prompt and output.

Tokens per step: n-gram's own K̄ where the workload gives one (replayed on the traffic file, or the own-output
prior of the corpus), else a share of suffix decoding's K̄ on the same traffic (advisor.predict.absolute.ngram_gain,
NGRAM_SHARE ASSUMED). The step pays n-gram's own speculative-step cost from the host profile suffix's prediction
matched (one host for both methods).
"""

from __future__ import annotations

from advisor.methods.base import GainEstimate, common_config, vllm_method_name


def same_host(sp) -> str | None:
    """The host profile suffix's prediction matched (n-gram and MTP are priced on the same host), or None where it
    spans several (an unmatched host: they then span them too)."""
    pid = getattr(sp, "host_profile", None)
    return pid if pid and "," not in pid else None


def own_kbar(workload, p, sp, k: int | None = None):
    """n-gram's own K̄: replayed on the workload's file, or the own-output (or published) prior where the
    suffix prediction ``sp`` uses one (its typed ``k_bar_kind``: one source for both methods); None: a share of
    suffix's."""
    from advisor.predict.kbar_prior import ngram_kbar_for

    if workload is None or getattr(sp, "k_bar_host", None):
        return None  # on the seed host n-gram is priced as a share of the K̄ that host's gains imply
    return ngram_kbar_for(workload, p.family, own_prior_ok=getattr(sp, "k_bar_kind", None) == "own_output",
                          published_source_id=getattr(sp, "k_bar_published_source_id", None), k=k)  # fmt: skip


class Ngram:
    id = "ngram"
    title = "n-gram (prompt lookup)"
    order = 3
    uses_drafter = False

    def vllm_name(self, vf) -> str:
        return vllm_method_name(vf, self.id, "ngram")

    def needs(self, profile, drafter, vf) -> str | None:
        return None

    def ks(self, profile, drafter, *, k_fixed, k_rules, policy, query, vf=None) -> list[int]:
        from advisor.kbar.ngram import default_k

        # --k is suffix's; n-gram keeps --ngram-k, else the advisor's n-gram K (advisor.kbar.ngram)
        return [query.ngram_k or default_k()]

    def estimate(self, ctx, k, n, context):
        from advisor.predict.absolute import ngram_gain

        sp = ctx.suffix_at(ctx.layout.tp, n, ctx.ngram_k_ref)  # n-gram's tokens per step: a share of suffix's at the table's K
        if sp is None:
            return None
        base = getattr(sp, "k_bar_host", None) or sp.k_bar  # the K̄ the host's fit prices suffix at (the seed host's own)
        own = own_kbar(ctx.workload, ctx.profile, sp, k)
        band, r, notes = ngram_gain(ctx.profile, ctx.gpu, ctx.layout, n, context, k, base, ngram=own, build=same_host(sp),
                                    suffix_kbar_sigma=getattr(sp, "k_bar_sigma", 0.0))  # fmt: skip
        typed = {"k_bar_kind": own.kind, "k_bar_published_source_id": own.published_source_id} if own is not None else {}
        kbar = max(1.0, band.value * r)
        if ctx.vf.ngram_drafts_full_k:  # 0.34: the GPU n-gram speculator verifies all K every step, no CPU proposer
            from advisor.methods import _drafted as dr

            r_full, full_notes = dr.full_k_step(ctx.profile, ctx.gpu, ctx.layout, n, context, k)
            scale = r / r_full
            band = band.model_copy(update={"value": band.value * scale, "low": band.low * scale, "high": band.high * scale})
            return GainEstimate(gain=band, r=r_full, k_bar=kbar, k_bar_note=notes[0], **typed,
                                notes=[*notes[:1], f"n-gram on vLLM {ctx.vf.version}: {full_notes[0]}"])  # fmt: skip
        return GainEstimate(gain=band, r=r, k_bar=kbar, k_bar_note=notes[0], notes=notes, **typed)

    def tokens_per_seq(self, k: int, vf) -> float:
        return 1.0 + k  # drafts exactly K where it matches (and, on 0.34, filler past the match)

    def speculative_config(self, decision, vf) -> dict:
        from advisor.domain.decision import NgramParams

        cfg = common_config(decision, self.vllm_name(vf))
        if decision.ngram != NgramParams():
            cfg.update(decision.ngram.model_dump())
        return cfg

    def extra_memory(self, profile, drafter) -> tuple[int, int]:
        return 0, 0


METHOD = Ngram()
