"""Drafters as models the catalog knows: EAGLE-3 heads, EAGLE-1/2 heads and draft models (issue 41 item 2).

A :class:`Drafter` is the draft network of a speculative method as the step-cost physics and the memory plan see
it: a ``ModelProfile`` of the network itself (an EAGLE-3 head is a one-layer dense decoder whose LM head has the
draft vocabulary), the fusion layer that feeds it the target's hidden states, its own weights and KV cache.

:func:`load_drafter` resolves a drafter like a model (local directory, catalog id, HF cache: ``advisor.model.source``)
and tells the checkpoint formats apart by their config.json:

- **speculators** (vLLM's speculators library, RedHatAI's ``*-speculator.eagle3``): ``speculators_model_type`` /
  ``speculators_config`` at the top, the decoder layer in ``transformer_layer_config``, ``draft_vocab_size``;
- **EAGLE-3 native** (the EAGLE authors', SpecForge's): a flat Llama config with ``draft_vocab_size`` or an
  ``architectures`` entry containing ``Eagle3`` (``LlamaForCausalLMEagle3``, ``Eagle3LlamaForCausalLM``);
- **EAGLE-1/2**: ``EagleLlamaForCausalLM`` / ``LlamaForCausalLMEagle`` or vLLM's ``model_type: eagle`` wrapper;
- anything else that profiles as a causal LM is a **draft model**.

Everything here is pure but :func:`load_drafter` and :func:`drafters_for`, which read config and card files through
``advisor.model.source``.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from advisor.errors import ConfigError
from advisor.model.card import DrafterKind
from advisor.model.schema import ModelProfile

class PairIssue(BaseModel):
    """What :func:`check_pair` found: a pair vLLM refuses or breaks on, or one that runs with unknown acceptance."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["refusal", "warning"]
    """refusal: the pair does not run; warning: it runs, but the drafter was trained for another target."""
    text: str
    """The message, stating the values and the fix."""

EAGLE3_AUX_LAYERS = 3
"""Target hidden states an EAGLE-3 head fuses: vLLM's ``llama_eagle3.py`` ``LlamaModel.__init__`` builds
``fc = ReplicatedLinear(target_hidden_size * 3, hidden_size, bias=False)`` whenever ``use_aux_hidden_state``
(the default; ``eagle_config.use_aux_hidden_state: false`` turns it off)."""

Format = Literal["speculators", "eagle3", "eagle", "draft_model"]
_KIND_ORDER = {"eagle3": 0, "eagle": 1, "draft_model": 2}
_SPECULATORS_KINDS = {"eagle3": "eagle3", "eagle": "eagle", "hass": "eagle"}


class Drafter(BaseModel):
    """A speculative drafter: the network that proposes tokens, its cost-relevant shape and memory."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(min_length=1)
    """The drafter as named (HF id, catalog id or path)."""
    kind: DrafterKind
    """eagle3 | eagle | draft_model."""
    targets: tuple[str, ...] = ()
    """HF ids of the targets it was trained for (catalog card ``drafter.target``, else a speculators config's
    ``verifier.name_or_path`` when that is a hub id); empty when unknown."""
    profile: ModelProfile
    """The draft network priced like any model. EAGLE heads: a dense decoder of the head's own layer count, hidden
    size, heads, KV heads and intermediate size whose ``vocab_size`` is ``draft_vocab_size`` (the LM head's rows);
    its parameter and byte fields are the head's real ones (fc, the 2*hidden-wide layer-0 QKV, no input embedding).
    Draft models: their normal profile."""
    aux_hidden_layers: int = Field(ge=0, le=16)
    """Target hidden states fused per step: 3 for EAGLE-3 (:data:`EAGLE3_AUX_LAYERS`), 0 for EAGLE-1/2 (which
    reads the target's last hidden state through its own 2*hidden -> hidden fc) and draft models."""
    target_hidden_size: int = Field(ge=0)
    """Hidden size of the target whose states the head reads: ``target_hidden_size`` in the config, else the
    head's own hidden size (vLLM ``llama_eagle3.py``: ``fc_input_size = target_hidden_size * 3`` when the config has
    one, ``hidden_size * 3`` otherwise). 0 for draft models."""
    fc_params: int = Field(ge=0)
    """Parameters of the fusion layer: EAGLE-3 ``aux_hidden_layers * target_hidden_size * hidden_size``; EAGLE-1/2
    ``2 * hidden * hidden`` (+ bias where the config says); 0 for draft models."""
    draft_vocab_size: int = Field(ge=1)
    """Rows of the drafter's LM head: ``draft_vocab_size`` of an EAGLE-3 config (32000 for the Llama-3.1-8B heads),
    else the vocabulary."""
    target_vocab_size: int | None = Field(default=None, ge=1)
    """Vocabulary of the target the head maps its draft tokens into (``vocab_size`` of the head's config: the
    ``d2t`` map and the logits are this wide); None for draft models, whose own vocabulary must equal the
    target's."""
    weight_bytes: int = Field(ge=0)
    """All the drafter's weights as loaded, in the serving dtype (vLLM builds the draft model's config with the
    target's dtype; a float32 checkpoint counts 2 bytes per parameter, as ``ModelProfile.weights_dtype`` does):
    decoder layers, norms, fc, LM head and, for EAGLE-3, the int64 ``draft_id_to_target_id`` map. EAGLE heads do
    not count an input embedding: they read the target's. vLLM ``vllm/model_executor/models/llama_eagle3.py``,
    ``Eagle3LlamaForCausalLM.load_weights``, skips ``embed_tokens`` when the checkpoint carries none
    (``skip_substrs.append("embed_tokens")``) and the EAGLE proposer then uses the target model's table; a
    checkpoint that ships its own copy (speculators conversions do) loads it, which this figure leaves out (the
    profile's notes say so). Draft models: their profile's ``weight_bytes`` (own embedding included)."""
    kv_bytes_per_token: int = Field(ge=0)
    """The drafter's own KV cache per token, at 16-bit KV: its layers x KV heads x head_dim x 2 (K and V) x 2
    bytes; for a draft model, its profile's figure."""
    source: str = Field(min_length=1)
    """Where its config.json was found (bundled catalog, local path, HF cache, hub)."""


def _kind_of(raw: dict, card: dict) -> tuple[Format, DrafterKind] | None:
    """(format, kind) of an EAGLE head's config, or None for a config that is no head (a model, maybe a draft
    model). ConfigError for a speculators config of an algorithm advisor does not model."""
    spec_type = raw.get("speculators_model_type")
    if spec_type is not None or isinstance(raw.get("speculators_config"), dict):
        algo = spec_type or (raw.get("speculators_config") or {}).get("algorithm")
        kind = _SPECULATORS_KINDS.get(str(algo).lower()) if algo is not None else None
        if kind is None:
            raise ConfigError(f"speculators config with speculators_model_type={algo!r}: advisor prices eagle3 and eagle "
                              "(HASS) heads; pass one of those, or a draft model (a causal LM of the target's vocabulary)")  # fmt: skip
        return "speculators", kind
    archs = [a for a in (raw.get("architectures") or []) if isinstance(a, str)]
    if any("eagle3" in a.lower() for a in archs) or "draft_vocab_size" in raw:
        return "eagle3", "eagle3"
    if raw.get("model_type") == "eagle" or any("eagle" in a.lower() for a in archs):
        return "eagle", "eagle"
    drafter_card = card.get("drafter") or {}
    if card.get("family") == "drafter" and drafter_card.get("kind") in ("eagle3", "eagle"):
        return ("eagle3" if drafter_card["kind"] == "eagle3" else "eagle"), drafter_card["kind"]
    return None


def head_kind(raw: dict, card: dict | None = None) -> DrafterKind | None:
    """``eagle3`` / ``eagle`` when ``raw`` (a parsed config.json, with its catalog card) is an EAGLE head rather than a
    model to serve; None otherwise. ``advisor.model.load.load_profile`` refuses heads with this."""
    found = _kind_of(raw, card or {})
    return found[1] if found else None


def _layer_config(raw: dict, fmt: Format) -> dict:
    """The decoder-layer config of a head: ``transformer_layer_config`` (speculators), vLLM's ``model`` wrapper
    (``model_type: eagle``), else the flat config itself."""
    if fmt == "speculators":
        layer = raw.get("transformer_layer_config")
        if not isinstance(layer, dict):
            raise ConfigError("speculators config without a transformer_layer_config object: cannot read the head's "
                              "layer shape; pass the head's full config.json")  # fmt: skip
    elif fmt == "eagle" and raw.get("model_type") == "eagle":
        layer = raw.get("model")
        if not isinstance(layer, dict):
            raise ConfigError("EAGLE config (model_type eagle) without a model object: cannot read the head's layer "
                              "shape; pass the head's full config.json")  # fmt: skip
    else:
        layer = raw
    if not layer.get("model_type"):
        raise ConfigError(f"{fmt} head config has no model_type for its decoder layer; expected e.g. \"llama\"")
    return layer


def _positive_int(cfg: dict, key: str, default: int | None = None) -> int:
    value = cfg.get(key, default)
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ConfigError(f"drafter config has {key}={value!r}; expected a positive integer")
    return value


def _head(ref: str, raw: dict, card: dict, fmt: Format, kind: DrafterKind, source: str) -> dict:
    """The Drafter fields of an EAGLE / EAGLE-3 head."""
    from advisor.model.profile import build_profile, parse_quant, weights_dtype

    layer = _layer_config(raw, fmt)
    top = {**layer, **{k: raw[k] for k in ("torch_dtype", "dtype") if raw.get(k) and not layer.get(k)}}
    hidden = _positive_int(layer, "hidden_size")
    heads = _positive_int(layer, "num_attention_heads")
    kv_heads = _positive_int(layer, "num_key_value_heads", heads)
    head_dim = _positive_int(layer, "head_dim", hidden // heads)
    inter = _positive_int(layer, "intermediate_size")
    layers = _positive_int(layer, "num_hidden_layers")
    target_vocab = _positive_int(layer, "vocab_size")
    draft_vocab = raw.get("draft_vocab_size") or raw.get("truncated_vocab_size") or layer.get("draft_vocab_size")
    draft_vocab = draft_vocab if draft_vocab is not None else target_vocab
    if not isinstance(draft_vocab, int) or isinstance(draft_vocab, bool) or draft_vocab < 1:
        raise ConfigError(f"drafter config has draft_vocab_size={draft_vocab!r}; expected a positive integer")
    target_hidden = raw.get("target_hidden_size") or layer.get("target_hidden_size") or hidden
    eagle_cfg = raw.get("eagle_config") if isinstance(raw.get("eagle_config"), dict) else {}
    bias = bool(layer.get("attention_bias"))
    mlp_bias = bool(layer.get("mlp_bias"))
    if kind == "eagle3":
        aux = EAGLE3_AUX_LAYERS if eagle_cfg.get("use_aux_hidden_state", True) else 0
        fc = aux * target_hidden * hidden
        qkv_in0 = 2 * hidden  # llama_eagle3.py LlamaDecoderLayer: layer 0 attends over cat([embeds, hidden])
        norms_per_layer = 3  # input_layernorm, hidden_norm, post_attention_layernorm
    else:
        aux = 0
        fc = 2 * hidden * hidden + (hidden if raw.get("fusion_bias") or layer.get("fusion_bias") else 0)
        qkv_in0 = hidden
        norms_per_layer = 2
    q_out, kv_out = heads * head_dim, kv_heads * head_dim
    attn_bias = (q_out + 2 * kv_out + hidden) if bias else 0
    per_layer_rest = q_out * hidden + 3 * hidden * inter + (2 * inter + hidden if mlp_bias else 0) + norms_per_layer * hidden
    layer_params = sum((qkv_in0 if i == 0 else hidden) * (q_out + 2 * kv_out) + per_layer_rest + attn_bias
                       for i in range(layers))  # fmt: skip
    lm_head = draft_vocab * hidden
    total = fc + layer_params + hidden + lm_head  # + final norm
    quant = parse_quant(raw)
    _, dense_bytes = weights_dtype(top, quant)
    d2t_bytes = 8 * draft_vocab if kind == "eagle3" else 0  # draft_id_to_target_id: int64 per draft token
    weight_bytes = total * dense_bytes + d2t_bytes
    kv_bytes = layers * kv_heads * head_dim * 2 * 2

    synth = {**layer, "vocab_size": draft_vocab, "num_hidden_layers": layers, "tie_word_embeddings": False,
             "architectures": raw.get("architectures") or layer.get("architectures") or [str(layer["model_type"])]}  # fmt: skip
    for key in ("torch_dtype", "dtype"):
        if top.get(key):
            synth[key] = top[key]
    synth.pop("quantization_config", None)
    base = build_profile(ref, synth, source=source, card=None)
    notes = [*base.notes,
             f"{kind} head ({fmt} format): priced as a {layers}-layer dense decoder with a {draft_vocab}-row LM head; "
             f"layer 0 attends over 2*hidden={qkv_in0} inputs" if kind == "eagle3" else
             f"{kind} head ({fmt} format): priced as a {layers}-layer dense decoder with a {draft_vocab}-row LM head",
             "no input embedding counted: vLLM gives the head the target's embedding table "
             "(llama_eagle3.py Eagle3LlamaForCausalLM.load_weights skips embed_tokens when the checkpoint has none); "
             f"a checkpoint that ships its own copy adds {target_vocab * hidden * dense_bytes:,} bytes"]  # fmt: skip
    if kind == "eagle":
        notes.append("EAGLE-1/2 LM head counted at draft_vocab x hidden; vLLM may share the target's LM head instead")
    if quant.method:
        notes.append(f"quantization_config ({quant.method}) ignored: the head is counted at {dense_bytes} bytes per parameter")
    profile = base.model_copy(update={
        "params_total_b": round(total / 1e9, 4), "params_active_b": round(total / 1e9, 4), "params_embedding_b": 0.0,
        "weight_bytes": weight_bytes, "kv_bytes_per_token": kv_bytes, "kv_bytes_per_token_full": kv_bytes,
        "sliding_window": None, "sliding_window_layers": 0, "notes": notes,
    })  # fmt: skip
    return {"kind": kind, "profile": profile, "aux_hidden_layers": aux, "target_hidden_size": target_hidden,
            "fc_params": fc, "draft_vocab_size": draft_vocab, "target_vocab_size": target_vocab,
            "weight_bytes": weight_bytes, "kv_bytes_per_token": kv_bytes}  # fmt: skip


def _draft_model(ref: str, raw: dict, card: dict, source: str) -> dict:
    from advisor.model.profile import build_profile

    archs = [a for a in (raw.get("architectures") or []) if isinstance(a, str)]
    if archs and not any(a.endswith(("ForCausalLM", "LMHeadModel", "ForConditionalGeneration")) for a in archs):
        raise ConfigError(f"{ref}: architectures {archs} is neither an EAGLE / EAGLE-3 head nor a causal LM; a drafter is "
                          "a speculators or EAGLE head directory, or a draft model (…ForCausalLM) of the target's vocabulary")  # fmt: skip
    drafter_card = card.get("drafter") or {}
    profile = build_profile(ref, raw, source=source, card=card if card.get("family") != "drafter" else None)
    if drafter_card.get("kind") in ("eagle3", "eagle"):
        raise ConfigError(f"{ref}: its catalog card says kind {drafter_card['kind']} but the config is a plain causal LM; "
                          "fix the card or pass kind='draft_model'")  # fmt: skip
    return {"kind": "draft_model", "profile": profile, "aux_hidden_layers": 0, "target_hidden_size": 0, "fc_params": 0,
            "draft_vocab_size": profile.vocab_size, "target_vocab_size": None, "weight_bytes": profile.weight_bytes,
            "kv_bytes_per_token": profile.kv_bytes_per_token}  # fmt: skip


def _targets(raw: dict, card: dict) -> tuple[str, ...]:
    from advisor.model.source import HF_ID

    listed = (card.get("drafter") or {}).get("target")
    if listed:
        return tuple(str(t) for t in listed)
    verifier = ((raw.get("speculators_config") or {}).get("verifier") or {}) if isinstance(raw.get("speculators_config"), dict) else {}
    name = verifier.get("name_or_path") if isinstance(verifier, dict) else None
    if isinstance(name, str) and "/" in name and not name.startswith(("/", ".", "~")) and HF_ID.match(name):
        return (name,)
    return ()


def build_drafter(ref: str, raw: dict, *, source: str, card: dict | None = None, kind: DrafterKind | None = None) -> Drafter:
    """The Drafter of a parsed config.json (pure). ``kind`` forces the reading: a plain-config EAGLE-1 checkpoint
    (architectures ``LlamaForCausalLM``, no ``draft_vocab_size``) cannot be told from a one-layer draft model by
    its config alone."""
    card = card or {}
    found = _kind_of(raw, card)
    if kind == "draft_model":
        fields = _draft_model(ref, raw, {k: v for k, v in card.items() if k != "drafter"}, source)
    elif kind in ("eagle3", "eagle") or found is not None:
        fmt, detected = found if found is not None else (kind, kind)
        fields = _head(ref, raw, card, fmt, kind or detected, source)
    else:
        fields = _draft_model(ref, raw, card, source)
    return Drafter(id=ref, targets=_targets(raw, card), source=source, **fields)


def load_drafter(ref: str, *, kind: DrafterKind | None = None, settings=None) -> Drafter:
    """Resolve ``ref`` like a model (local directory or config.json, catalog id, HF cache, hub when online:
    ``advisor.model.source.resolve_config``) and read it as a drafter (see the module docstring for the formats)."""
    from advisor.model.source import resolve_config

    if settings is None:
        from advisor.settings import load_settings

        settings = load_settings()
    found = resolve_config(ref, catalog_dirs=settings.catalog_dirs, hf_cache_dir=settings.hf_cache_dir, offline=settings.offline)
    origin = found.origin if found.path is None else f"{found.origin}: {found.path}"
    return build_drafter(found.id, found.config, source=origin, card=found.card, kind=kind)


def drafters_for(target_id: str, *, catalog_dirs=()) -> list[str]:
    """Catalog drafters whose card lists ``target_id`` among its targets: the id compared whole and
    case-insensitively (``meta-llama/Llama-3.1-8B`` does not get the ``-Instruct`` heads; nothing fuzzier), EAGLE-3
    heads first, then EAGLE heads, then draft models, each group by id."""
    from pathlib import Path

    from advisor.model.source import catalog_cards, catalog_roots

    want = target_id.strip().lower()
    hits: list[tuple[int, str]] = []
    for cid, card in catalog_cards(catalog_roots([Path(d) for d in catalog_dirs])):
        block = card.get("drafter") or {}
        if any(str(t).strip().lower() == want for t in block.get("target") or ()):
            hits.append((_KIND_ORDER.get(str(block.get("kind")), 3), cid))
    return [cid for _, cid in sorted(hits, key=lambda h: (h[0], h[1].lower()))]


def _issue(kind, text: str) -> PairIssue:
    return PairIssue(kind=kind, text=text)


def check_pair(drafter: Drafter, target: ModelProfile) -> PairIssue | None:
    """Why ``drafter`` cannot draft for ``target`` (a ``refusal``), a ``warning`` that it was trained for another
    target (the pair runs, acceptance is unknown), or None.

    - EAGLE heads read the target's hidden states: the head's ``target_hidden_size`` must be the target's hidden
      size (the fc input of ``llama_eagle3.py`` is ``target_hidden_size * 3``), and an EAGLE-3 head's
      ``target_vocab_size`` (its ``d2t`` map and logits width) must be the target's vocabulary.
    - A draft model must have the target's vocabulary: vLLM raises "Target and draft model should have the same
      vocabulary size" (``vllm/config/speculative.py``, ``SpeculativeConfig.verify_equal_vocab_size_if_draft_model``).
    """
    if drafter.kind in ("eagle3", "eagle"):
        if drafter.target_hidden_size != target.hidden_size:
            return _issue("refusal", f"{drafter.id} is an {drafter.kind} head that reads hidden states of width "
                    f"{drafter.target_hidden_size}, but {target.id} has hidden_size {target.hidden_size}; "
                    "use a head trained for this target (see drafters_for)")  # fmt: skip
        if drafter.kind == "eagle3" and drafter.target_vocab_size is not None and drafter.target_vocab_size != target.vocab_size:
            return _issue("refusal", f"{drafter.id} maps its draft tokens into a vocabulary of {drafter.target_vocab_size}, but "
                    f"{target.id} has vocab_size {target.vocab_size}; use a head trained for this target's tokenizer")  # fmt: skip
    elif drafter.draft_vocab_size != target.vocab_size:
        return _issue("refusal", f"draft model {drafter.id} has vocab_size {drafter.draft_vocab_size} and {target.id} has "
                f"{target.vocab_size}; vLLM requires equal vocabularies for a draft model "
                "(vllm/config/speculative.py SpeculativeConfig.verify_equal_vocab_size_if_draft_model): pick a draft "
                "model of the target's tokenizer")  # fmt: skip
    if drafter.targets and target.id.strip().lower() not in {t.lower() for t in drafter.targets}:
        return _issue("warning", f"{drafter.id} was trained for {', '.join(drafter.targets)}, not {target.id}: it runs, but its "
                "acceptance on this target is unknown (measure it with advisor probe)")  # fmt: skip
    return None
