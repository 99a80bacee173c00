"""ActPair: action-aligned dual encoder, canonical action/scene tags, query rewrite with dual-view
late fusion, and pivot-promote pairwise reranking (ActPair paper, Secs. 3.2-3.5).

1. **Canonical vocabulary** (Sec. 3.2). The top-K most frequent raw action (or scene) tags are
   mapped onto a fixed set of canonical tags ``φ: R^K → T``. The paper asks an LLM for it
   (:func:`build_vocabulary_with_llm`, any ``prompt -> text`` callable). The embedded default,
   :func:`build_vocabulary`, embeds the tags with a frozen text encoder and merges them by
   deterministic average-linkage agglomerative clustering on cosine similarity (until the most
   similar clusters are less similar than ``threshold``, or until ``n_clusters`` remain); each
   cluster is named by its most frequent member. The canonical action tags are the labels
   ``y_act`` of the action head.
2. **Dual encoder** (Sec. 3.3). A visual tower over a track's frozen observation tokens and a text
   tower over frozen text features (token states, or one pooled vector), each a small transformer
   with attention pooling, a linear map into the shared space and L2. The paper fine-tunes
   SigLIP2 itself; here both encoders stay frozen and the towers are what is trained. Objective
   ``L = L_siglip + λ_action · (½[CE(p_img, y) + CE(p_txt, y)] + ½[KL(p_img‖p_txt) + KL(p_txt‖p_img)])``
   with ``λ_action = 0.2``, ``p = softmax(W_act E)`` from one shared head ``W_act``, and the SigLIP
   loss of ``models.losses.siglip_loss`` with a learned ``t'`` (init ``log 10``, ``t = exp t'``)
   and bias ``b`` (init ``-10``).
3. **Query rewrite and dual-view retrieval** (Sec. 3.4). A query gets the canonical action and scene
   tags nearest to it and is rewritten into the paper's fixed template
   (:data:`REWRITE_TEMPLATE`). The embedded default, :func:`template_rewrite`, fills the template
   deterministically from the query's predicates (colours and other appearance → person and
   clothing; walks, stands, ... → action; the scene tag → scene); :func:`llm_rewrite` asks an LLM.
   Both views are scored over the whole gallery; the top-K (100) of each view are united, each
   candidate's fused score is the mean of its two views' scores, and the top-M (10) of the union go
   to the reranker (:func:`dual_view_retrieve`).
4. **Pairwise reranking** (Sec. 3.5). ``models.rerank.pivot_promote`` (Algorithm 1) with a
   comparator ``compare(a, b) -> "a" | "b" | "tie"`` that counts its calls: the embedded
   :class:`FactComparator` reads the candidates' facts against the query's predicates;
   :class:`VLMComparator` wraps any VLM callable with the paper's comparison criteria.
"""
from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from models.facts import EVENTS, Fact, InvalidOutput, Predicate, QueryProposal, predicate_support
from models.llm.jsonout import load_json_object
from models.losses import siglip_loss
from models.rerank import pivot_promote


# -- configuration --------------------------------------------------------------------------------
@dataclass
class ActPairConfig:
    """ActPair dual encoder and retrieval settings; defaults are the paper's where it gives them."""

    d_visual: int = 1024             # width of a frozen visual (observation) token
    d_text: int = 384                # width of a frozen text token / pooled vector (MiniLM: 384)
    d_embed: int = 768               # shared embedding width (SigLIP2-B/16-256: 768)
    d_model: int = 256               # tower width (not in the paper: it fine-tunes SigLIP2 itself)
    n_layers: int = 2                # transformer layers per tower
    n_heads: int = 4                 # attention heads per tower
    ff_mult: int = 4                 # feed-forward width as a multiple of d_model
    max_visual_tokens: int = 576     # most visual tokens per track
    max_text_tokens: int = 128       # most text tokens per query
    dropout: float = 0.0             # dropout inside the towers
    n_actions: int = 16              # |T_act|: canonical action tags (take it from the vocabulary)
    lambda_action: float = 0.2       # weight of the action term
    t_prime_init: float = math.log(10.0)  # SigLIP log-scale t' (t = exp t')
    bias_init: float = -10.0         # SigLIP bias b
    top_k: int = 100                 # candidates per query view before the union
    top_m: int = 10                  # fused candidates passed to the pairwise reranker

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if f.type == "int" and (not isinstance(value, int) or value < 1):
                raise ValueError(f"ActPairConfig.{f.name} must be a positive integer, got {value!r}")
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model ({self.d_model}) must be divisible by n_heads ({self.n_heads})")
        if not 0 <= self.dropout < 1:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout}")
        if not (math.isfinite(self.lambda_action) and self.lambda_action >= 0):
            raise ValueError(f"lambda_action must be a finite number >= 0, got {self.lambda_action}")
        if self.top_m > self.top_k:
            raise ValueError(f"top_m ({self.top_m}) must not exceed top_k ({self.top_k})")

    @classmethod
    def from_dict(cls, data: dict) -> ActPairConfig:
        """A config from plain data (JSON), refusing unknown keys."""
        if not isinstance(data, dict):
            raise ValueError(f"ActPairConfig needs a dict, got {type(data).__name__}")
        unknown = sorted(set(data) - {f.name for f in fields(cls)})
        if unknown:
            raise ValueError(f"unknown ActPairConfig keys: {unknown}")
        return cls(**data)

    def to_dict(self) -> dict:
        return asdict(self)


# -- the dual encoder -----------------------------------------------------------------------------
class _Tower(nn.Module):
    """Frozen tokens → projection (+ positions) → transformer → attention pooling → linear → L2."""

    def __init__(self, d_in: int, max_tokens: int, c: ActPairConfig):
        super().__init__()
        self.d_in, self.max_tokens = d_in, max_tokens
        self.proj = nn.Linear(d_in, c.d_model)
        self.positions = nn.Parameter(torch.randn(max_tokens, c.d_model) * 0.02)     # [T, D]
        layer = nn.TransformerEncoderLayer(c.d_model, c.n_heads, c.ff_mult * c.d_model, c.dropout,
                                           activation="gelu", batch_first=True, norm_first=True)
        self.body = nn.TransformerEncoder(layer, c.n_layers, enable_nested_tensor=False)
        self.probe = nn.Parameter(torch.randn(1, 1, c.d_model) * 0.02)              # [1, 1, D]
        self.pool = nn.MultiheadAttention(c.d_model, c.n_heads, batch_first=True)
        self.norm = nn.LayerNorm(c.d_model)
        self.out = nn.Linear(c.d_model, c.d_embed)

    def forward(self, tokens: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        if tokens.ndim == 2:                                                 # pooled vectors [B, d]
            tokens = tokens.unsqueeze(1)                                     # [B, 1, d]
            mask = None
        if tokens.ndim != 3 or tokens.shape[-1] != self.d_in:
            raise ValueError(f"tokens must be [B, n, {self.d_in}] (or [B, {self.d_in}]), got {list(tokens.shape)}")
        b, n, _ = tokens.shape
        if n > self.max_tokens:
            raise ValueError(f"{n} tokens is more than the tower's {self.max_tokens}")
        if mask is None:
            mask = torch.ones(b, n, dtype=torch.bool, device=tokens.device)
        elif mask.shape != (b, n):
            raise ValueError(f"mask must be [B, n] = {[b, n]}, got {list(mask.shape)}")
        mask = mask.to(device=tokens.device, dtype=torch.bool)
        if not bool(mask.any(dim=1).all()):
            raise ValueError("every item needs at least one valid token")
        x = self.proj(tokens) + self.positions[:n]                           # [B, n, D]
        h = self.body(x, src_key_padding_mask=~mask)                         # [B, n, D]
        pooled, _ = self.pool(self.probe.expand(b, -1, -1), h, h, key_padding_mask=~mask,
                              need_weights=False)                            # [B, 1, D]
        return F.normalize(self.out(self.norm(pooled.squeeze(1))), dim=-1)   # [B, d_embed]


class ActPair(nn.Module):
    """Visual and text towers into one space, a shared action head, SigLIP scale and bias."""

    def __init__(self, config: ActPairConfig):
        super().__init__()
        self.config = config
        self.visual = _Tower(config.d_visual, config.max_visual_tokens, config)
        self.text = _Tower(config.d_text, config.max_text_tokens, config)
        self.action_head = nn.Linear(config.d_embed, config.n_actions, bias=False)   # W_act
        self.t_prime = nn.Parameter(torch.tensor(float(config.t_prime_init)))
        self.bias = nn.Parameter(torch.tensor(float(config.bias_init)))

    def encode_tracks(self, tokens: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """``E_img`` ``[B, d_embed]`` unit rows from visual tokens ``[B, n, d_visual]``."""
        return self.visual(tokens, mask)

    def encode_queries(self, text: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """``E_txt`` ``[B, d_embed]`` unit rows from text tokens ``[B, L, d_text]`` or pooled
        vectors ``[B, d_text]``."""
        return self.text(text, mask)

    def action_logits(self, embeddings: torch.Tensor) -> torch.Tensor:
        """``W_act E`` ``[B, n_actions]`` (the same head for both modalities)."""
        return self.action_head(embeddings)

    def training_loss(self, tokens: torch.Tensor, mask: torch.Tensor | None, text: torch.Tensor,
                      text_mask: torch.Tensor | None, actions: torch.Tensor, *,
                      rank: int = 0, world_size: int = 1) -> dict:
        """SigLIP plus the weighted action term on one batch of row-aligned (track, query) pairs.

        ``actions`` ``[B]`` are canonical action indices (``-1``: none known; such rows skip the
        cross-entropy but keep the consistency term). Returns ``loss`` and its parts."""
        img = self.encode_tracks(tokens, mask)                               # [B, E]
        txt = self.encode_queries(text, text_mask)                           # [B, E]
        if img.shape[0] != txt.shape[0] or actions.shape != (img.shape[0],):
            raise ValueError(f"{img.shape[0]} tracks, {txt.shape[0]} queries and actions of shape "
                             f"{list(actions.shape)} must pair row by row")
        sig = siglip_loss(img, txt, self.t_prime.exp(), self.bias, rank=rank, world_size=world_size)
        act = action_loss(self.action_logits(img), self.action_logits(txt), actions)
        loss = sig + self.config.lambda_action * act["action"]
        return {"loss": loss, "siglip": sig.detach(), "action": act["action"].detach(),
                "ce": act["ce"].detach(), "consistency": act["consistency"].detach()}


def build_actpair(config: ActPairConfig | dict | None = None) -> ActPair:
    """The ActPair dual encoder from a config (an :class:`ActPairConfig` or its plain-data form)."""
    if config is None:
        config = ActPairConfig()
    elif isinstance(config, dict):
        config = ActPairConfig.from_dict(config)
    elif not isinstance(config, ActPairConfig):
        raise ValueError(f"config must be an ActPairConfig or a dict, got {type(config).__name__}")
    return ActPair(config)


def symmetric_kl(logits_a: torch.Tensor, logits_b: torch.Tensor) -> torch.Tensor:
    """``½ [KL(p_a‖p_b) + KL(p_b‖p_a)]`` of the softmax distributions, averaged over rows."""
    log_a = F.log_softmax(logits_a, dim=-1)                                  # [B, C]
    log_b = F.log_softmax(logits_b, dim=-1)                                  # [B, C]
    kl_ab = (log_a.exp() * (log_a - log_b)).sum(-1)                          # [B]
    kl_ba = (log_b.exp() * (log_b - log_a)).sum(-1)                          # [B]
    return 0.5 * (kl_ab + kl_ba).mean()


def action_loss(logits_img: torch.Tensor, logits_txt: torch.Tensor, labels: torch.Tensor) -> dict:
    """``L_action = ½[CE(p_img, y) + CE(p_txt, y)] + L_cons`` with ``L_cons`` the symmetric KL.

    ``labels`` ``[B]`` are class indices; rows labelled ``-1`` are left out of the cross-entropy
    (it is 0 when no row has a label) and still count in the consistency term."""
    if logits_img.shape != logits_txt.shape or logits_img.ndim != 2:
        raise ValueError("image and text action logits must both be [B, C]")
    if labels.shape != logits_img.shape[:1]:
        raise ValueError(f"labels must be [B] = {list(logits_img.shape[:1])}, got {list(labels.shape)}")
    n_classes = logits_img.shape[1]
    if bool(((labels < -1) | (labels >= n_classes)).any()):
        raise ValueError(f"action labels must be in 0..{n_classes - 1} or -1 (unknown)")
    known = labels >= 0                                                      # [B]
    if bool(known.any()):
        ce = 0.5 * (F.cross_entropy(logits_img[known], labels[known])
                    + F.cross_entropy(logits_txt[known], labels[known]))
    else:
        ce = logits_img.sum() * 0.0
    cons = symmetric_kl(logits_img, logits_txt)
    return {"action": ce + cons, "ce": ce, "consistency": cons}


# -- canonical tag vocabulary ---------------------------------------------------------------------
def normalise_tag(tag: str) -> str:
    """Lower case, single spaces, no surrounding punctuation: ``" Walking,  slowly. "`` →
    ``"walking, slowly"``."""
    return re.sub(r"\s+", " ", str(tag)).strip().strip(".;:!?\"'").strip().lower()


def top_k_tags(tags: Mapping[str, int] | Iterable[str], k: int) -> list[tuple[str, int]]:
    """The ``k`` most frequent normalised tags with their counts (``c(r)`` of Eq. 3): raw tags as
    an iterable of occurrences or a ``{tag: count}`` mapping. Ties by tag text."""
    if not isinstance(k, int) or k < 1:
        raise ValueError(f"k must be a positive integer, got {k!r}")
    counts: Counter[str] = Counter()
    items = tags.items() if isinstance(tags, Mapping) else ((t, 1) for t in tags)
    for tag, count in items:
        if not isinstance(tag, str):
            raise ValueError(f"tags must be strings, got {tag!r}")
        if count < 0:
            raise ValueError(f"tag {tag!r} has a negative count {count}")
        name = normalise_tag(tag)
        if name and count:
            counts[name] += int(count)
    if not counts:
        raise ValueError("no tags to build a vocabulary from")
    return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:k]


TextEmbedder = Callable[[list[str]], np.ndarray]


def embed_texts(embedder, texts: Sequence[str]) -> np.ndarray:
    """Unit rows ``[N, d]`` float64 from a ``texts -> [N, d]`` callable or a frozen
    ``models.encoders`` text encoder (its ``encode(texts).pooled``)."""
    out = embedder.encode(list(texts)).pooled if hasattr(embedder, "encode") else embedder(list(texts))
    arr = np.asarray(out.detach().cpu() if torch.is_tensor(out) else out, dtype=np.float64)
    if arr.ndim != 2 or arr.shape[0] != len(texts):
        raise ValueError(f"the embedder returned shape {list(arr.shape)} for {len(texts)} texts")
    norms = np.linalg.norm(arr, axis=1, keepdims=True)
    if not np.isfinite(arr).all() or (norms == 0).any():
        raise ValueError("the embedder returned a zero or non-finite vector")
    return arr / norms


def average_linkage(unit: np.ndarray, *, threshold: float | None = 0.7, n_clusters: int | None = None,
                    max_clusters: int | None = None) -> list[list[int]]:
    """Deterministic average-linkage agglomerative clustering of unit rows on cosine similarity.

    Repeatedly merges the two clusters with the highest mean pairwise similarity (ties: the pair
    with the lowest indices) until ``n_clusters`` remain; without ``n_clusters``, until that
    similarity falls below ``threshold`` and at most ``max_clusters`` (if given) remain. Returns
    clusters as sorted member lists, ordered by their first member."""
    n = unit.shape[0]
    if n_clusters is None and threshold is None:
        raise ValueError("give threshold or n_clusters")
    if n_clusters is not None and not 1 <= n_clusters <= n:
        raise ValueError(f"n_clusters must be in 1..{n}, got {n_clusters}")
    if max_clusters is not None and max_clusters < 1:
        raise ValueError(f"max_clusters must be >= 1, got {max_clusters}")
    sim = unit @ unit.T                                                      # [n, n]
    np.fill_diagonal(sim, -np.inf)
    size = np.ones(n)
    members = {i: [i] for i in range(n)}
    while len(members) > 1:
        i, j = divmod(int(np.argmax(sim)), n)                               # first maximum: i < j
        if n_clusters is not None:
            if len(members) <= n_clusters:
                break
        elif sim[i, j] < threshold and (max_clusters is None or len(members) <= max_clusters):
            break
        merged = (size[i] * sim[i] + size[j] * sim[j]) / (size[i] + size[j])  # [n]
        sim[i], sim[:, i] = merged, merged
        sim[i, i] = -np.inf
        sim[j], sim[:, j] = -np.inf, -np.inf
        size[i] += size[j]
        members[i] += members.pop(j)
    return sorted(sorted(m) for m in members.values())


@dataclass
class TagVocabulary:
    """A fixed canonical vocabulary of one kind of tag and the map from raw tags onto it."""

    kind: str                                    # "action" or "scene"
    canonical: list[str]                         # canonical tags, most frequent first (class order)
    mapping: dict[str, str]                      # normalised raw tag (of the top-K) -> canonical tag
    counts: dict[str, int]                       # canonical tag -> summed count of its raw tags
    method: str                                  # "agglomerative" or "llm"
    centroids: list[list[float]] | None = None   # [C][d] unit mean embedding of each class's raw tags

    def index(self, tag: str) -> int:
        """Class index of a raw (or canonical) tag; -1 when it is outside the vocabulary."""
        name = normalise_tag(tag)
        canonical = self.mapping.get(name, name if name in self.canonical else None)
        return self.canonical.index(canonical) if canonical is not None else -1

    def assign(self, embeddings: np.ndarray) -> list[str]:
        """The canonical tag whose centroid is nearest (cosine) to each embedding row ``[Q, d]``."""
        if self.centroids is None:
            raise ValueError(f"the {self.kind} vocabulary has no centroids (build it with an embedder)")
        e = np.asarray(embeddings, dtype=np.float64)
        if e.ndim != 2 or e.shape[1] != len(self.centroids[0]):
            raise ValueError(f"embeddings must be [Q, {len(self.centroids[0])}], got {list(e.shape)}")
        sims = e @ np.asarray(self.centroids).T                              # [Q, C]
        return [self.canonical[int(i)] for i in sims.argmax(axis=1)]

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> TagVocabulary:
        return cls(**data)


def _centroids(unit: np.ndarray, tags: list[str], mapping: dict[str, str], canonical: list[str]):
    rows = []
    for name in canonical:
        m = unit[[i for i, t in enumerate(tags) if mapping[t] == name]].mean(axis=0)
        rows.append((m / np.linalg.norm(m)).tolist())
    return rows


def _vocabulary(kind: str, ranked: list[tuple[str, int]], mapping: dict[str, str], method: str,
                unit: np.ndarray | None) -> TagVocabulary:
    totals: Counter[str] = Counter()
    for tag, count in ranked:
        totals[mapping[tag]] += count
    canonical = sorted(totals, key=lambda c: (-totals[c], c))
    tags = [t for t, _ in ranked]
    centroids = _centroids(unit, tags, mapping, canonical) if unit is not None else None
    return TagVocabulary(kind=kind, canonical=canonical, mapping=mapping, counts=dict(totals),
                         method=method, centroids=centroids)


def build_vocabulary(tags: Mapping[str, int] | Iterable[str], embedder, *, kind: str = "action",
                     top_k: int = 100, threshold: float = 0.7, n_clusters: int | None = None,
                     max_clusters: int | None = None) -> TagVocabulary:
    """The embedded default of Sec. 3.2: top-K raw tags → text-encoder vectors → average-linkage
    clusters → each cluster named by its most frequent member (ties: alphabetical).

    ``threshold`` (cosine, default 0.7) suits sentence encoders such as all-MiniLM-L6-v2, where
    rephrasings of one action ("walking" / "walks" / "person walking") sit above it and different
    actions below; ``max_clusters`` caps the number of canonical tags (merging on below the
    threshold, e.g. to fit an action head); ``n_clusters`` fixes it instead."""
    ranked = top_k_tags(tags, top_k)                                          # most frequent first
    names = [t for t, _ in ranked]
    unit = embed_texts(embedder, names)                                       # [K, d]
    n_clusters = None if n_clusters is None else min(n_clusters, len(names))
    clusters = average_linkage(unit, threshold=threshold, n_clusters=n_clusters, max_clusters=max_clusters)
    mapping = {}
    for members in clusters:
        head = names[min(members)]                    # ranked order: most frequent, then alphabetical
        mapping.update({names[i]: head for i in members})
    return _vocabulary(kind, ranked, mapping, "agglomerative", unit)


def tag_canonicalisation_prompt(ranked: list[tuple[str, int]], kind: str, n_categories: int | None) -> str:
    """The instruction for an LLM that induces the canonical categories (Sec. 3.2)."""
    listing = "\n".join(f"- {tag} ({count})" for tag, count in ranked)
    size = f"exactly {n_categories}" if n_categories else "a small number of"
    return (f"Below are the most frequent raw {kind} tags of a pedestrian dataset with their counts.\n"
            f"Group tags that describe the same underlying {kind} (synonyms, rephrasings, surface "
            f"variation) into {size} canonical categories, and give each category a short name.\n"
            "Answer with one JSON object only: {\"mapping\": {\"<raw tag>\": \"<canonical name>\", ...}} "
            "with every raw tag below as a key, written exactly as listed.\n\n" + listing)


def build_vocabulary_with_llm(tags: Mapping[str, int] | Iterable[str], llm, *, kind: str = "action",
                              top_k: int = 100, n_categories: int | None = None,
                              embedder=None) -> TagVocabulary:
    """The paper's path: an LLM maps the top-K tags onto canonical names.

    ``llm`` is a ``models.llm`` language backend (its ``canonicalise_tags``, with ``n_categories``
    as the most canonical names, 16 when not given) or any ``prompt -> answer`` callable, asked
    with :func:`tag_canonicalisation_prompt` for a JSON object ``{"mapping": {raw: canonical}}``.
    Every top-K tag must be mapped (:class:`models.facts.InvalidOutput` otherwise, with the raw
    answer). With an ``embedder`` the vocabulary also gets centroids for
    :meth:`TagVocabulary.assign`."""
    ranked = top_k_tags(tags, top_k)
    if hasattr(llm, "canonicalise_tags"):
        occurrences = [tag for tag, count in ranked for _ in range(count)]
        result = llm.canonicalise_tags(occurrences, kind=kind, top_k=top_k, max_vocabulary=n_categories or 16)
        if result.failed:
            raise InvalidOutput(f"the language backend gave no usable {kind} canonicalisation",
                                "\n".join(getattr(result.provenance, "raw_texts", []) or []))
        raw_map, answer = result.mapping, json.dumps(result.to_dict(), default=str)
        if n_categories is not None and len(set(raw_map.values())) > n_categories:
            raise InvalidOutput(f"asked for at most {n_categories} categories, got {len(set(raw_map.values()))}",
                                answer)
        n_categories = None                            # the backend's contract is "at most"
    elif callable(llm):
        answer = llm(tag_canonicalisation_prompt(ranked, kind, n_categories))
        raw_map = load_json_object(answer).get("mapping")
        if not isinstance(raw_map, dict):
            raise InvalidOutput('the answer has no "mapping" object', answer)
    else:
        raise ValueError("llm must be a models.llm language backend or a callable prompt -> answer")
    given = {normalise_tag(k): normalise_tag(v) for k, v in raw_map.items() if isinstance(v, str)}
    mapping = {}
    for tag, _ in ranked:
        if not given.get(tag):
            raise InvalidOutput(f"the answer maps no canonical {kind} for the tag {tag!r}", answer)
        mapping[tag] = given[tag]
    n_found = len(set(mapping.values()))
    if n_categories is not None and n_found != n_categories:
        raise InvalidOutput(f"asked for {n_categories} categories, the answer has {n_found}", answer)
    unit = embed_texts(embedder, [t for t, _ in ranked]) if embedder is not None else None
    return _vocabulary(kind, ranked, mapping, "llm", unit)


def raw_action_tags(facts: Sequence[Fact]) -> list[str]:
    """Raw action tags of a trajectory: ``"<event> <value>"`` of each known event fact."""
    return [normalise_tag(f"{f.name} {f.value}") for f in facts if f.kind == "event" and f.known and f.value]


def dominant_action_tag(facts: Sequence[Fact]) -> str | None:
    """The action label of a trajectory for single-label supervision: the raw tag of the known
    event that covers the most frames (ties: the earlier event in ``models.facts.EVENTS``, then the
    earlier fact); None without a known event."""
    best: tuple | None = None
    for order, f in enumerate(facts):
        if f.kind != "event" or not f.known or not f.value:
            continue
        key = (-(f.end_frame - f.start_frame), EVENTS.index(f.name), order)
        if best is None or key < best[0]:
            best = (key, normalise_tag(f"{f.name} {f.value}"))
    return best[1] if best else None


# -- query rewrite --------------------------------------------------------------------------------
REWRITE_TEMPLATE = "The image shows [person description] wearing [clothing] [action]. The background features [scene details]."
UNKNOWN_SCENE = "an unspecified scene"
UNKNOWN_CLOTHING = "unspecified clothing"


def fill_template(person: str, clothing: str, action: str, scene: str) -> str:
    """:data:`REWRITE_TEMPLATE` with its four slots filled (an empty action slot is left out)."""
    action = f" {action}" if action else ""
    return f"The image shows {person} wearing {clothing}{action}. The background features {scene}."


def _join(parts: list[str]) -> str:
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def _article(phrase: str) -> str:
    return ("an " if phrase[:1] in "aeiou" else "a ") + phrase


_DIRECTIONS = {"left": "to the left", "right": "to the right", "towards": "towards the camera",
               "away": "away from the camera"}
_PACE = {"slow": "slowly", "fast": "quickly", "normal": "at a normal pace"}
_EVENT_VERBS = {"stands": "standing", "enters": "entering", "leaves": "leaving", "crosses": "crossing",
                "occluded_by": "occluded by", "passes_in_front_of": "passing in front of"}


def template_rewrite(predicates: QueryProposal | Sequence[Predicate | dict], *,
                     action_tag: str | None = None, scene_tag: str | None = None) -> str:
    """The deterministic default rewrite: the query's predicates into :data:`REWRITE_TEMPLATE`.

    - person description: ``a [size] [category] [on the <position>]`` (category default
      ``person``);
    - clothing: ``a <upper_colour> top and <lower_colour> trousers`` (``unspecified clothing``
      when neither is required);
    - action: each required event in ``models.facts.EVENTS`` order — ``walking [pace] <direction>``
      (``speed`` gives the pace; ``moving <pace>`` without a walk), ``standing still``,
      ``entering from the left``, ``crossing person 2``, ...; the assigned canonical
      ``action_tag`` when the query requires no event;
    - scene: the assigned canonical ``scene_tag`` (``an unspecified scene`` without one).
    """
    items = predicates.predicates if isinstance(predicates, QueryProposal) else list(predicates)
    preds = [(p.name, p.value) if isinstance(p, Predicate) else (p["name"], p["value"]) for p in items]
    if not preds and not action_tag and not scene_tag:
        raise ValueError("nothing to rewrite: the query has no predicates and no tags were assigned")
    values: dict[str, list[str]] = {}
    for name, value in preds:
        values.setdefault(name, []).append(str(value).strip())

    def first(name: str) -> str | None:
        return values.get(name, [None])[0]

    noun = " ".join(x for x in (first("size"), first("category") or "person") if x)
    person = _article(noun) + (f" on the {first('position')}" if first("position") else "")
    clothes = []
    if first("upper_colour"):
        clothes.append(_article(f"{first('upper_colour')} top"))
    if first("lower_colour"):
        clothes.append(f"{first('lower_colour')} trousers")
    clothing = _join(clothes) if clothes else UNKNOWN_CLOTHING

    pace = _PACE.get(first("speed") or "", first("speed"))
    actions = []
    for event in EVENTS:
        for value in values.get(event, []):
            if event == "walks":
                actions.append(" ".join(x for x in ("walking", pace, _DIRECTIONS.get(value, value)) if x))
            else:
                actions.append(f"{_EVENT_VERBS[event]} {value}")
    if pace and "walks" not in values:
        actions.insert(0, f"moving {pace}")
    if not actions and action_tag:
        actions.append(normalise_tag(action_tag))
    scene = normalise_tag(scene_tag) if scene_tag else UNKNOWN_SCENE
    return fill_template(person, clothing, _join(actions) if actions else "", scene)


def rewrite_prompt(query_text: str, action_tag: str | None, scene_tag: str | None) -> str:
    """The instruction for an LLM rewrite ``Q_rew = M(Q_orig ⊕ τ_act ⊕ τ_scene)`` (Sec. 3.4)."""
    return ("Rewrite the pedestrian search query below into exactly this template, keeping every "
            "detail of the query that fits it and adding nothing the query and tags do not say:\n"
            f"{REWRITE_TEMPLATE}\n\nQuery: {query_text.strip()}\n"
            f"Action tag: {action_tag or 'none'}\nScene tag: {scene_tag or 'none'}\n"
            "Answer with the rewritten query only.")


def llm_rewrite(query_text: str, llm: Callable[[str], str], *, action_tag: str | None = None,
                scene_tag: str | None = None) -> str:
    """The paper's rewrite by an LLM (``prompt -> answer``); the answer must follow the template's
    two sentences (:class:`models.facts.InvalidOutput` otherwise)."""
    if not query_text or not query_text.strip():
        raise ValueError("query_text is empty")
    answer = llm(rewrite_prompt(query_text, action_tag, scene_tag))
    text = " ".join(str(answer).strip().strip('"').split())
    if not re.fullmatch(r"The image shows .+ wearing .+\. The background features .+\.", text):
        raise InvalidOutput("the rewrite does not follow the template "
                            "'The image shows ... wearing .... The background features ....'", str(answer))
    return text


# -- dual-view retrieval --------------------------------------------------------------------------
@dataclass
class DualViewResult:
    """The fused top-M of dual-view retrieval, per query."""

    indices: torch.Tensor                        # [Q, M] gallery indices, best fused score first
    scores: torch.Tensor                         # [Q, M] fused scores ½ (S_orig + S_rew)
    union_size: torch.Tensor                     # [Q] size of C_orig ∪ C_rew


def _top(scores: torch.Tensor, k: int) -> torch.Tensor:
    """Indices ``[Q, k]`` of the k best scores per row, ties by the lower index."""
    return torch.sort(scores, dim=1, descending=True, stable=True).indices[:, :k]


@torch.no_grad()
def dual_view_retrieve(s_orig: torch.Tensor, s_rew: torch.Tensor, top_k: int = 100,
                       top_m: int = 10) -> DualViewResult:
    """Parallel late fusion (Eq. 7): per query, the union of the top-``top_k`` of the original
    view's scores ``s_orig [Q, N]`` and of the rewritten view's ``s_rew [Q, N]``, re-sorted by the
    mean of both views' scores, cut to the top ``top_m``. Both views score the whole gallery, so
    every union member has both scores. Ties go to the lower gallery index. A gallery smaller than
    ``top_k`` (or ``top_m``) is taken whole."""
    if s_orig.shape != s_rew.shape or s_orig.ndim != 2:
        raise ValueError(f"both views must be [Q, N] score matrices, got {list(s_orig.shape)} and {list(s_rew.shape)}")
    if not (isinstance(top_k, int) and isinstance(top_m, int) and 1 <= top_m <= top_k):
        raise ValueError(f"need 1 <= top_m <= top_k, got top_m={top_m!r}, top_k={top_k!r}")
    if not (torch.isfinite(s_orig).all() and torch.isfinite(s_rew).all()):
        raise ValueError("scores must be finite")
    q, n = s_orig.shape
    k, m = min(top_k, n), min(top_m, n)
    union = torch.zeros(q, n, dtype=torch.bool, device=s_orig.device)        # [Q, N]
    union.scatter_(1, _top(s_orig, k), True)
    union.scatter_(1, _top(s_rew, k), True)
    fused = (s_orig + s_rew) / 2                                             # [Q, N]
    ranked = _top(fused.masked_fill(~union, -math.inf), m)                   # [Q, M]
    return DualViewResult(indices=ranked, scores=fused.gather(1, ranked), union_size=union.sum(dim=1))


# -- pairwise comparators and reranking -----------------------------------------------------------
class FactComparator:
    """The embedded pairwise comparator: which of two candidates' facts support more of the query's
    predicates (``models.facts.predicate_support``)?

    ``compare(a, b)``: more supported predicates wins; with as many, fewer contradicted ones wins;
    otherwise ``"tie"``. ``facts`` maps a candidate to its approved facts (a candidate without an
    entry has none: every predicate is unknown for it); ``covered`` optionally maps a candidate to
    its observed interval, so that absent events count as contradictions. ``calls`` counts
    comparisons."""

    def __init__(self, predicates: QueryProposal | Sequence[Predicate | dict],
                 facts: Mapping[Hashable, Sequence[Fact]],
                 covered: Mapping[Hashable, tuple[int, int]] | None = None):
        self.predicates = list(predicates.predicates if isinstance(predicates, QueryProposal) else predicates)
        if not self.predicates:
            raise ValueError("a FactComparator needs the query's predicates")
        self.facts = facts
        self.covered = covered or {}
        self.calls = 0
        self._support: dict[Hashable, tuple[int, int]] = {}

    def support(self, candidate: Hashable) -> tuple[int, int]:
        """(supported, contradicted) predicate counts of one candidate."""
        if candidate not in self._support:
            facts = list(self.facts.get(candidate, []))
            s = [predicate_support(p, facts, covered=self.covered.get(candidate)) for p in self.predicates]
            self._support[candidate] = (s.count(1), s.count(0))
        return self._support[candidate]

    def __call__(self, a: Hashable, b: Hashable) -> str:
        self.calls += 1
        (sa, ca), (sb, cb) = self.support(a), self.support(b)
        if sa != sb:
            return "a" if sa > sb else "b"
        if ca != cb:
            return "a" if ca < cb else "b"
        return "tie"


COMPARISON_CRITERIA = ("the primary action", "the target person", "clothing", "object interaction",
                       "secondary people", "scene and background", "spatial relationships")


def comparison_prompt(query_text: str) -> str:
    """The pairwise instruction of Sec. 3.5 for a VLM shown candidate A and candidate B."""
    return (f"Query: {query_text.strip()}\n"
            "Two candidates are shown: A and B. Compare them against the query on "
            + ", ".join(COMPARISON_CRITERIA)
            + ", and on any explicit contradiction or missing detail relative to the query. "
            "Which candidate does the query describe better? Answer with exactly one word: "
            "A, B or tie.")


def parse_decision(answer: str) -> str | None:
    """``"a"``, ``"b"`` or ``"tie"`` from a comparator's answer (``A``, ``Candidate B``,
    ``{"decision": "tie"}``, ``neither``, ...); None when it says none of them."""
    text = str(answer).strip()
    if text.startswith("{"):
        try:
            text = str(json.loads(text).get("decision", ""))
        except (json.JSONDecodeError, AttributeError):
            return None
    words = re.sub(r"[^a-z ]", " ", text.lower()).split()
    words = [w for w in words if w not in {"candidate", "image", "option", "answer", "the", "is"}]
    if len(words) != 1:
        return None
    return {"a": "a", "b": "b", "tie": "tie", "neither": "tie", "equal": "tie"}.get(words[0])


class VLMComparator:
    """A VLM as the pairwise comparator: ``judge(prompt, a, b) -> answer`` sees the comparison
    prompt and the two candidates (whatever the caller's judge needs: crops, frame paths, ids).

    Answers are read with :func:`parse_decision`; an answer that is none of a / b / tie counts as
    ``"tie"`` (the prior order stands) and in ``invalid``. ``calls`` counts comparisons."""

    def __init__(self, judge: Callable[[str, Hashable, Hashable], str], query_text: str):
        if not callable(judge):
            raise ValueError("judge must be callable: judge(prompt, a, b) -> answer")
        self.judge = judge
        self.prompt = comparison_prompt(query_text)
        self.calls = 0
        self.invalid = 0

    def __call__(self, a: Hashable, b: Hashable) -> str:
        self.calls += 1
        decision = parse_decision(self.judge(self.prompt, a, b))
        if decision is None:
            self.invalid += 1
            return "tie"
        return decision


def pairwise_rerank(result: DualViewResult, comparator_for: Callable[[int], Callable[[int, int], str]]
                    ) -> tuple[list[list[int]], int]:
    """Pivot-promote (Algorithm 1) over each query's fused top-M. ``comparator_for(q)`` gives the
    comparator of query ``q`` (on gallery indices). Returns the reranked gallery indices per query
    and the total number of comparator calls."""
    reranked, total = [], 0
    for q, candidates in enumerate(result.indices.tolist()):
        order, n_calls = pivot_promote(candidates, comparator_for(q))
        reranked.append(list(order))
        total += int(n_calls)
    return reranked, total


# -- the retriever of models.training -------------------------------------------------------------
# The embedded towers: sized for the frozen CPU features of the embedded encoders and a CPU.
EMBEDDED_TOWERS = {"d_embed": 256, "d_model": 256, "n_layers": 2, "n_heads": 4}


@dataclass
class ActPairRetrieverConfig:
    """ActPair as a ``models.training`` retriever: frozen encoders, features, towers, vocabulary."""

    appearance: dict = field(default_factory=dict)   # ImageEncoderConfig of a_t (handcrafted by default)
    text: dict = field(default_factory=dict)         # TextEncoderConfig of the text tokens (MiniLM)
    features: dict = field(default_factory=dict)     # FeatureConfig (n_f^max = 32 observations per track)
    model: dict = field(default_factory=lambda: dict(EMBEDDED_TOWERS))  # ActPairConfig fields
    geometry: bool = True                            # append g_t to each observation token
    tag_top_k: int = 100                             # K most frequent raw action tags kept (Eq. 3)
    tag_threshold: float = 0.7                       # clustering threshold of the embedded vocabulary
    # the canonical action vocabulary (TagVocabulary.to_dict()); None: built by the first prepare()
    # from that snapshot's queries and then kept here, so a checkpoint reloads the same classes
    vocabulary: dict | None = None

    def __post_init__(self) -> None:
        derived = sorted({"d_visual", "d_text", "max_visual_tokens", "max_text_tokens"} & set(self.model))
        if derived:
            raise ValueError(f"ActPairRetrieverConfig.model: {derived} follow from the encoders; leave them out")
        if not isinstance(self.tag_top_k, int) or self.tag_top_k < 1:
            raise ValueError(f"tag_top_k must be a positive integer, got {self.tag_top_k!r}")

    @classmethod
    def from_dict(cls, data: dict | None) -> ActPairRetrieverConfig:
        data = dict(data or {})
        unknown = sorted(set(data) - {f.name for f in fields(cls)})
        if unknown:
            raise ValueError(f"unknown ActPairRetrieverConfig keys: {unknown}")
        return cls(**data)

    def to_dict(self) -> dict:
        return asdict(self)


def query_action_tag(predicates: Sequence[Predicate | dict]) -> str | None:
    """The raw action tag of a query for the action head: ``"<event> <value>"`` of its first
    required event in ``models.facts.EVENTS`` order (``"walks left"``); None without one."""
    events = [(p.name, p.value) if isinstance(p, Predicate) else (p["name"], p["value"]) for p in predicates]
    events = [(EVENTS.index(n), i, n, v) for i, (n, v) in enumerate(events) if n in EVENTS and v]
    if not events:
        return None
    _, _, name, value = min(events)
    return normalise_tag(f"{name} {value}")


class ActPairRetriever(nn.Module):
    """ActPair behind the retriever interface of ``models.training``: the visual tower reads the
    observation tokens of frozen features, the text tower the frozen text encoder's token states;
    each query's action label comes from its required events through the canonical vocabulary."""

    kind = "actpair"

    def __init__(self, config: ActPairRetrieverConfig | dict | None = None):
        super().__init__()
        from models.encoders import (
            ImageEncoderConfig,
            TextEncoderConfig,
            build_image_encoder,
            build_text_encoder,
        )
        from models.features import GEOMETRY_DIM, FeatureConfig

        cfg = config if isinstance(config, ActPairRetrieverConfig) else ActPairRetrieverConfig.from_dict(config)
        self.config = cfg
        self.feature_config = FeatureConfig.from_dict(cfg.features)
        text_config = TextEncoderConfig.from_dict(cfg.text)
        # frozen encoders: plain attributes, never in the state dict
        self.appearance_encoder = build_image_encoder(ImageEncoderConfig.from_dict(cfg.appearance))
        self.text_encoder = build_text_encoder(text_config)
        d_visual = self.appearance_encoder.dim + (GEOMETRY_DIM if cfg.geometry else 0)
        max_text = int(getattr(self.text_encoder, "max_length", None) or text_config.max_length)
        self.model = ActPair(ActPairConfig.from_dict(
            {**cfg.model, "d_visual": d_visual, "d_text": self.text_encoder.token_dim,
             "max_visual_tokens": self.feature_config.n_fast_max, "max_text_tokens": max_text}))
        self.vocabulary = TagVocabulary.from_dict(cfg.vocabulary) if cfg.vocabulary else None
        if self.vocabulary is not None and len(self.vocabulary.canonical) > self.model.config.n_actions:
            raise ValueError(f"the vocabulary has {len(self.vocabulary.canonical)} actions, the head "
                             f"{self.model.config.n_actions}")

    def config_dict(self) -> dict:
        return self.config.to_dict()

    @property
    def device(self) -> torch.device:
        return self.model.bias.device

    def build_action_vocabulary(self, snapshot) -> TagVocabulary:
        """The canonical action vocabulary of ``snapshot``'s queries (one raw tag per query with
        an event), at most ``n_actions`` classes; kept on the model and in its config."""
        tags = [t for t in (query_action_tag(q.predicates) for q in snapshot.queries) if t]
        if not tags:
            raise ValueError(f"no query of snapshot {snapshot.split!r} requires an event: no action tags")
        vocab = build_vocabulary(tags, self.text_encoder, kind="action", top_k=self.config.tag_top_k,
                                 threshold=self.config.tag_threshold, max_clusters=self.model.config.n_actions)
        self.vocabulary = vocab
        self.config.vocabulary = vocab.to_dict()
        return vocab

    def prepare(self, snapshot, records=None, *, cache_dir: str | None = None):
        from dataclasses import replace

        from models.features import FeatureExtractor
        from models.scout import prepare_observations

        if self.vocabulary is None and snapshot.queries:
            self.build_action_vocabulary(snapshot)
        fcfg = replace(self.feature_config, cache_dir=cache_dir or self.feature_config.cache_dir)
        extractor = FeatureExtractor(fcfg, self.appearance_encoder, text=self.text_encoder)
        return prepare_observations(extractor, snapshot, records, geometry=self.config.geometry)

    def encode_tracks(self, data, records) -> torch.Tensor:
        """``E_img`` ``[P, d_embed]`` of ``records`` (row order kept)."""
        from models.scout import record_rows

        rows = record_rows(data, records)
        return self.model.encode_tracks(data.tokens[rows].to(self.device), data.mask[rows].to(self.device))

    def encode_queries(self, data, query_ids) -> torch.Tensor:
        """``E_txt`` ``[Q, d_embed]`` of the queries (row order kept)."""
        from models.scout import query_rows

        rows = query_rows(data, query_ids)
        tokens = torch.from_numpy(data.text.tokens[rows]).to(self.device)       # [Q, L, D]
        mask = torch.from_numpy(data.text.mask[rows]).to(self.device)           # [Q, L]
        return self.model.encode_queries(tokens, mask)

    @torch.no_grad()
    def encode_texts(self, texts: Sequence[str]) -> torch.Tensor:
        """Any query texts (e.g. rewrites) through the frozen text encoder and the text tower."""
        enc = self.text_encoder.encode(list(texts))
        return self.model.encode_queries(torch.from_numpy(enc.tokens).to(self.device),
                                         torch.from_numpy(enc.mask).to(self.device))

    def score(self, q: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """Cosine similarity ``[Q, P]`` (the retrieval score of Sec. 3.4)."""
        return q @ v.T

    def action_labels(self, data, query_ids) -> torch.Tensor:
        """Canonical action index of each query ``[Q]`` (-1: no event, or outside the vocabulary)."""
        if self.vocabulary is None:
            raise ValueError("no action vocabulary: prepare() a snapshot with queries first")
        labels = []
        for q in query_ids:
            tag = query_action_tag(data.query_predicates[int(q)])
            labels.append(self.vocabulary.index(tag) if tag else -1)
        return torch.tensor(labels, dtype=torch.long, device=self.device)

    def training_loss(self, data, batch, ctx) -> dict:
        """SigLIP over the batch's (query, clean target) pairs (``models.scout.contrastive_pairs``
        leaves out false in-batch negatives) plus ``λ_action`` times the action term; with
        ``ctx.gather`` and several ranks SigLIP scores the pairs of all ranks together, otherwise
        each rank scores (and chooses) the pairs of its own groups only."""
        from models.batching import GROUP_SIZE
        from models.scout import contrastive_pairs, no_pair_loss

        qs, _ = batch.local_slices(ctx.rank, ctx.world_size)
        gather = ctx.world_size > 1 and ctx.gather
        keep = contrastive_pairs(batch, None if gather else qs)              # [B]
        local = [i for i in range(len(batch.query_ids))[qs] if keep[i]]
        rank, world = (ctx.rank, ctx.world_size) if gather else (0, 1)
        n_pairs = int(keep.sum())
        dropped = (len(batch.query_ids) if gather else len(range(len(batch.query_ids))[qs])) - n_pairs
        if not local:
            zero = no_pair_loss(self)
            if not gather:   # nothing to score here (no rank waits on this one's embeddings)
                return {"loss": zero, "pairs": 0, "dropped_pairs": dropped}
            # every local group conflicts with another rank's: no pair of this rank in the gathered batch
            d = self.model.config.d_embed
            empty = torch.zeros(0, d, device=self.device, requires_grad=True)
            sig = siglip_loss(empty, empty, self.model.t_prime.exp(), self.model.bias, rank=rank, world_size=world)
            return {"loss": sig + zero, "siglip": sig.detach(), "pairs": n_pairs, "dropped_pairs": dropped}
        qids = [batch.query_ids[i] for i in local]
        img = self.encode_tracks(data, [batch.records[i * GROUP_SIZE] for i in local])      # [b, E]
        txt = self.encode_queries(data, qids)                                                # [b, E]
        sig = siglip_loss(img, txt, self.model.t_prime.exp(), self.model.bias, rank=rank, world_size=world)
        labels = self.action_labels(data, qids)                                              # [b]
        act = action_loss(self.model.action_logits(img), self.model.action_logits(txt), labels)
        loss = sig + self.model.config.lambda_action * act["action"]
        return {"loss": loss, "siglip": sig.detach(), "action": act["action"].detach(), "ce": act["ce"].detach(),
                "consistency": act["consistency"].detach(), "t": float(self.model.t_prime.detach().exp()),
                "b": float(self.model.bias.detach()), "pairs": n_pairs, "dropped_pairs": dropped,
                "labelled_pairs": int((labels >= 0).sum())}

    def optimizer_defaults(self, steps: int) -> dict:
        """Batching for ``models.training.train`` (a TrainConfig ``batching`` key wins): groups without
        noisy-GT variants, since only each group's clean target is read."""
        return {"batching": {"noisy_gt": False}}

    # -- inference: rewrite and dual-view retrieval ------------------------------------------
    def rewrite(self, texts: Sequence[str], predicates: Sequence[Sequence[Predicate | dict]],
                scene_tags: Sequence[str | None] | None = None) -> list[str]:
        """Template rewrites of queries (:func:`template_rewrite`): each query's predicates, its
        nearest canonical action tag (:meth:`TagVocabulary.assign` on the frozen text vector) and
        its scene tag (none by default)."""
        if len(texts) != len(predicates):
            raise ValueError(f"{len(texts)} texts but {len(predicates)} predicate lists")
        scenes = list(scene_tags) if scene_tags is not None else [None] * len(texts)
        actions = (self.vocabulary.assign(embed_texts(self.text_encoder, list(texts)))
                   if self.vocabulary is not None and self.vocabulary.centroids and len(texts)
                   else [None] * len(texts))
        return [template_rewrite(list(p), action_tag=a, scene_tag=s)
                for p, a, s in zip(predicates, actions, scenes)]

    @torch.no_grad()
    def dual_view_search(self, texts: Sequence[str], rewrites: Sequence[str], gallery: torch.Tensor,
                         top_k: int | None = None, top_m: int | None = None) -> DualViewResult:
        """Sec. 3.4 over a gallery of track embeddings ``[N, d_embed]``: both views scored with the
        text tower, the top-K of each united, the mean score, the top-M."""
        s_orig = self.score(self.encode_texts(texts), gallery.to(self.device))                # [Q, N]
        s_rew = self.score(self.encode_texts(rewrites), gallery.to(self.device))              # [Q, N]
        c = self.model.config
        return dual_view_retrieve(s_orig, s_rew, top_k or c.top_k, top_m or c.top_m)


def build_retriever(config: dict | None = None) -> ActPairRetriever:
    """The factory ``models.training.MODEL_KINDS["actpair"]`` points to."""
    return ActPairRetriever(config)
