"""EAGLE-3: a one-layer head trained on the target's hidden states (three of its layers fused through an fc),
drafting a chain of K tokens (vLLM ``method="eagle3"``, the head as ``model``).

K̄ from the head's own acceptance (advisor.methods._drafted.acceptance: this host's probe, the head's published
per-position acceptance, a class prior); the step from the drafter's and the target's step-cost physics
(advisor.methods._drafted.drafted_step). The drafter: ``--draft`` or the catalog's pairing for the target
(advisor.model.drafter.drafters_for).
"""

from __future__ import annotations

from advisor.methods import _drafted as dr
from advisor.methods.base import GainEstimate, common_config, vllm_method_name

class DrafterMethod:
    """A method whose drafter is a model (EAGLE-3 head, EAGLE head or draft model): one class, one kind each."""

    kinds: tuple[str, ...] = ()
    uses_drafter = True

    def vllm_name(self, vf) -> str:
        return vllm_method_name(vf, self.id, self.id)

    def needs(self, profile, drafter, vf) -> str | None:
        if drafter is None or drafter.kind not in self.kinds:
            return f"no {self.title} drafter for {profile.id} (pass --draft DIR_OR_ID, or the catalog pairs none)"
        from advisor.model.drafter import check_pair

        issue = check_pair(drafter, profile)
        return issue.text if issue is not None and issue.kind == "refusal" else None

    def ks(self, profile, drafter, *, k_fixed, k_rules, policy, query, vf=None) -> list[int]:
        # searched over the policy table's drafter_k_grid (rules/policy/decider.yaml); --draft-k fixes it
        fixed = getattr(query, "draft_k", None)
        return [fixed] if fixed else list(policy.drafter_k_grid)

    def estimate(self, ctx, k, n, context):
        lay = ctx.layout
        key = (self.id, ctx.drafter.id, ctx.profile.id, ctx.profile.kv_bytes_per_token, ctx.gpu.name, lay.tp, lay.dp, lay.ep,
               k, n, round(context, 1))  # fmt: skip
        if key in ctx.memo:
            return ctx.memo[key]
        kbar, spread, source, kind = dr.acceptance(ctx.drafter, k, ctx.workload, ctx.profile.id, ctx.probes)
        host, where, measured = dr.host_costs(ctx.gpu)
        off = self.id not in ctx.vf.async_spec_methods  # vLLM turns async scheduling off for it on this line
        plain, verify, draft, notes = dr.drafted_step(ctx.profile, ctx.drafter, ctx.gpu, ctx.layout, n, context, k, host=host,
                                                      where=where, async_off=off)  # fmt: skip
        r = (verify + draft) / plain
        band = dr.gain_band(kbar, r, spread)
        if not measured:  # the host work per forward carried from another host: ASSUMED within x2 either way
            rs = [sum(dr.drafted_step(ctx.profile, ctx.drafter, ctx.gpu, ctx.layout, n, context, k,
                                      host=(host[0] * f, host[1] * f), async_off=off)[1:3]) / plain for f in (0.5, 2.0)]  # fmt: skip
            band = band.model_copy(update={"low": min(band.low, band.low * r / max(rs)),
                                           "high": max(band.high, band.high * r / min(rs))})  # fmt: skip
        est = GainEstimate(gain=band, k_bar=kbar, r=r, k_bar_source=source, k_bar_kind=kind,
                           notes=[f"{self.title} tokens/step {kbar:.2f} at K={k}: {source}", *notes])  # fmt: skip
        ctx.memo[key] = est
        return est

    def tokens_per_seq(self, k: int, vf) -> float:
        return 1.0 + k

    def speculative_config(self, decision, vf) -> dict:
        cfg = common_config(decision, self.vllm_name(vf))
        if decision.speculative_model is None:
            raise ValueError(f"{self.id} needs the drafter: set speculative_model")
        return {"method": cfg.pop("method"), "model": decision.speculative_model, **cfg}

    def extra_memory(self, profile, drafter) -> tuple[int, int]:
        """The drafter's weights (an EAGLE head shares the target's embedding) and its own KV per token."""
        if drafter is None:
            return 0, 0
        return drafter.weight_bytes, drafter.kv_bytes_per_token


class Eagle3(DrafterMethod):
    id = "eagle3"
    title = "EAGLE-3"
    order = 4
    kinds = ("eagle3",)


METHOD = Eagle3()
