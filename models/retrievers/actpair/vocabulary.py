"""ActPair's canonical action and scene tags (Sec. 3.2).

**Canonical vocabulary** (Sec. 3.2). The top-K most frequent raw action (or scene) tags are
mapped onto a fixed set of canonical tags ``φ: R^K → T``. The paper asks an LLM for it
(:func:`build_vocabulary_with_llm`: a ``models.backends.llm`` language backend, whose template
backend is the rule canonicaliser that runs on a CPU with no model, or any ``prompt -> text``
callable). :func:`build_vocabulary` embeds the tags with a frozen text encoder and merges them by
deterministic average-linkage agglomerative clustering on cosine similarity (until the most
similar clusters are less similar than ``threshold``, or until ``n_clusters`` remain); each
cluster is named by its most frequent member. The canonical action tags are the labels
``y_act`` of the action head.
"""
from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from models.backends.llm.jsonout import load_json_object
from models.config import PlainConfig
from models.facts import EVENTS, Fact, InvalidOutput
from models.wording import normalise_tag


# -- canonical tag vocabulary ---------------------------------------------------------------------
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
    ``models.backends.encoders`` text encoder (its ``encode(texts).pooled``)."""
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
class TagVocabulary(PlainConfig):
    """A fixed canonical vocabulary of one kind of tag and the map from raw tags onto it."""

    kind: str                                    # "action" or "scene"
    canonical: list[str]                         # canonical tags, most frequent first (class order)
    mapping: dict[str, str]                      # normalised raw tag (of the top-K) -> canonical tag
    counts: dict[str, int]                       # canonical tag -> summed count of its raw tags
    method: str                                  # "agglomerative", "template" (rules) or "llm"
    centroids: list[list[float]] | None = None   # [C][d] unit mean embedding of each class's raw tags
    # what canonicalised the tags (language backend, model, prompt version and SHA-256); None: clustering
    canonicaliser: dict | None = None

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


def _centroids(unit: np.ndarray, tags: list[str], mapping: dict[str, str], canonical: list[str]):
    rows = []
    for name in canonical:
        m = unit[[i for i, t in enumerate(tags) if mapping[t] == name]].mean(axis=0)
        rows.append((m / np.linalg.norm(m)).tolist())
    return rows


def _vocabulary(kind: str, ranked: list[tuple[str, int]], mapping: dict[str, str], method: str,
                unit: np.ndarray | None, canonicaliser: dict | None = None) -> TagVocabulary:
    totals: Counter[str] = Counter()
    for tag, count in ranked:
        totals[mapping[tag]] += count
    canonical = sorted(totals, key=lambda c: (-totals[c], c))
    tags = [t for t, _ in ranked]
    centroids = _centroids(unit, tags, mapping, canonical) if unit is not None else None
    return TagVocabulary(kind=kind, canonical=canonical, mapping=mapping, counts=dict(totals),
                         method=method, centroids=centroids, canonicaliser=canonicaliser)


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

    ``llm`` is a ``models.backends.llm`` language backend (its ``canonicalise_tags``, with ``n_categories``
    as the most canonical names, 16 when not given) or any ``prompt -> answer`` callable, asked
    with :func:`tag_canonicalisation_prompt` for a JSON object ``{"mapping": {raw: canonical}}``.
    Every top-K tag must be mapped (:class:`models.facts.InvalidOutput` otherwise, with the raw
    answer), except those a backend reports as dropped (the template's groups beyond its cap):
    they stay outside the vocabulary, as tags beyond the top K do. With an ``embedder`` the
    vocabulary also gets centroids for :meth:`TagVocabulary.assign`."""
    ranked = top_k_tags(tags, top_k)
    dropped: set[str] = set()
    canonicaliser, method = None, "llm"
    if hasattr(llm, "canonicalise_tags"):
        occurrences = [tag for tag, count in ranked for _ in range(count)]
        result = llm.canonicalise_tags(occurrences, kind=kind, top_k=top_k, max_vocabulary=n_categories or 16)
        if result.failed:
            raise InvalidOutput(f"the language backend gave no usable {kind} canonicalisation",
                                "\n".join(getattr(result.provenance, "raw_texts", []) or []))
        raw_map, answer = result.mapping, json.dumps(result.to_dict(), default=str)
        dropped = {normalise_tag(t) for t in result.dropped}
        made_by = result.provenance
        canonicaliser = {"backend": made_by.backend, "model": made_by.model,
                         "prompt_version": made_by.prompt_version, "prompt_sha256": made_by.prompt_sha256}
        method = "template" if made_by.backend == "template" else "llm"
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
        raise ValueError("llm must be a models.backends.llm language backend or a callable prompt -> answer")
    given = {normalise_tag(k): normalise_tag(v) for k, v in raw_map.items() if isinstance(v, str)}
    mapping = {}
    for tag, _ in ranked:
        if not given.get(tag) and tag not in dropped:
            raise InvalidOutput(f"the answer maps no canonical {kind} for the tag {tag!r}", answer)
        if given.get(tag):
            mapping[tag] = given[tag]
    if not mapping:
        raise InvalidOutput(f"the answer maps none of the {kind} tags", answer)
    n_found = len(set(mapping.values()))
    if n_categories is not None and n_found != n_categories:
        raise InvalidOutput(f"asked for {n_categories} categories, the answer has {n_found}", answer)
    ranked = [(t, c) for t, c in ranked if t in mapping]
    unit = embed_texts(embedder, [t for t, _ in ranked]) if embedder is not None else None
    return _vocabulary(kind, ranked, mapping, method, unit, canonicaliser)


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


def first_event_tag(pairs) -> str | None:
    """The raw action tag ``"<event> <value>"`` (``"walks left"``) of the first event among
    ``(name, value)`` pairs in ``models.facts.EVENTS`` order (ties: the earlier pair); None
    without one. Reads whatever pairs it is given: a text's reading at inference, a training
    query's verified predicates for its action label."""
    events = [(EVENTS.index(n), i, n, v) for i, (n, v) in enumerate(pairs) if n in EVENTS and v]
    if not events:
        return None
    _, _, name, value = min(events)
    return normalise_tag(f"{name} {value}")
