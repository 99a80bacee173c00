"""What the model-backed language backends share: prompts, the retry loop and answer validation.

A :class:`ChatLLM` implements the five tasks of :class:`models.backends.llm.base.LanguageBackend` on top
of one method, :meth:`ChatLLM.generate` (chat messages in, text out), that subclasses provide.
Each task renders its versioned prompt (``models.backends.llm.prompts``) and reads the answer strictly:

- queries: ``{"queries": [...]}``; each proposal goes through ``models.facts.parse_query`` (its
  predicates must cite approved, known facts that say what they say, never fusing intervals) and
  the co-temporal check; refused proposals are kept with the reason. While fewer than
  ``max_queries`` are accepted and attempts remain, the model is told what was refused and asked
  for more;
- relation: ``{"label", "decisive", "evidence", "reason"}``: the label in {1, 0, -1}, decisive
  predicate numbers within range, evidence ids among the trajectory's facts, a 1 or 0 with
  evidence and a 0 with a decisive predicate;
- tags: ``{"vocabulary", "mapping"}``: every retained raw tag mapped to a name of the vocabulary,
  at most ``max_vocabulary`` names;
- rewrite: ``{"action", "scene", "rewrite"}``: tags from the given vocabularies (or null), the
  rewrite in ActPair's template (``models.backends.llm.rewrite``).

An answer that fails its reading is followed by the answer itself and a correction turn quoting
the problem, within the attempt budget. Model misbehaviour never raises.
"""
from __future__ import annotations

import json
from collections.abc import Mapping

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
    tally,
)
from models.backends.llm.jsonout import load_json_object
from models.backends.llm.prompts import TaskPrompt, task_prompt
from models.backends.llm.rewrite import (
    REWRITE_TEMPLATE,
    RewriteResult,
    check_rewrite_arguments,
    read_rewrite,
    vocabulary_block,
)
from models.facts import Fact, InvalidOutput, Predicate, QueryProposal, parse_query

# Answer-length budget of the relation and tag tasks (the query task has GenerationBudget).
RELATION_MAX_NEW_TOKENS = 256
RELATION_MAX_ATTEMPTS = 2
TAGS_MAX_ATTEMPTS = 2
REWRITE_MAX_ATTEMPTS = 2
REWRITE_MAX_NEW_TOKENS = 192


def facts_block(facts: list[Fact]) -> str:
    """One JSON object per line for each fact (what the model is shown)."""
    rows = [{"id": f.id, "kind": f.kind, "name": f.name, "value": f.value, "start_frame": f.start_frame,
             "end_frame": f.end_frame, "scope": f.scope, "known": f.known} for f in facts]
    return "\n".join(json.dumps(r, ensure_ascii=False) for r in rows) or "(none)"


class ChatLLM:
    """Base class of the language backends that ask a chat model (see the module docstring)."""

    name = ""
    model = ""

    def generate(self, messages: list[dict], *, max_new_tokens: int) -> str:  # pragma: no cover - abstract
        raise NotImplementedError

    def _ask(self, prompt: TaskPrompt, user: str, read, *, attempts: int, max_new_tokens: int):
        """Ask until ``read(raw)`` accepts an answer (it raises InvalidOutput otherwise).

        Returns ``(value or None, provenance)``.
        """
        provenance = Provenance(self.name, self.model, prompt.version, prompt.sha256())
        messages = [{"role": "system", "content": prompt.system}, {"role": "user", "content": user}]
        for attempt in range(1, attempts + 1):
            raw = self.generate(messages, max_new_tokens=max_new_tokens)
            provenance.raw_texts.append(raw)
            provenance.attempts = attempt
            try:
                return read(raw), provenance
            except InvalidOutput as exc:
                provenance.errors.append(f"attempt {attempt}: {exc}")
                messages = [*messages, {"role": "assistant", "content": raw},
                            {"role": "user", "content": prompt.retry.format(error=exc)}]
        return None, provenance

    # -- queries ---------------------------------------------------------------------------------
    def generate_queries(self, facts: list[Fact], budget: GenerationBudget | None = None,
                         prompt_version: str | None = None) -> GenerationResult:
        check_facts_argument(facts)
        budget = budget or GenerationBudget()
        prompt = task_prompt("queries", prompt_version)
        known = [f for f in facts if f.known]
        provenance = Provenance(self.name, self.model, prompt.version, prompt.sha256())
        accepted: list[QueryProposal] = []
        rejected: list[Rejected] = []
        seen: set[str] = set()
        messages = [{"role": "system", "content": prompt.system},
                    {"role": "user", "content": prompt.user.format(facts=facts_block(known), n=budget.max_queries)}]
        for attempt in range(1, budget.max_attempts + 1):
            raw = self.generate(messages, max_new_tokens=budget.max_new_tokens)
            provenance.raw_texts.append(raw)
            provenance.attempts = attempt
            try:
                items = self._read_queries(raw)
            except InvalidOutput as exc:
                provenance.errors.append(f"attempt {attempt}: {exc}")
                messages = [*messages, {"role": "assistant", "content": raw},
                            {"role": "user", "content": prompt.retry.format(error=exc)}]
                continue
            refused_now = []
            for item in items:
                if len(accepted) >= budget.max_queries:
                    break
                try:
                    query = parse_query(item, facts)
                    problems = co_temporal_problems(query, facts)
                    if problems:
                        raise InvalidOutput("; ".join(problems))
                except InvalidOutput as exc:
                    rejected.append(Rejected(item if isinstance(item, dict) else {"raw": repr(item)}, str(exc)))
                    refused_now.append(str(exc))
                    continue
                if query.text.lower() in seen:
                    refused_now.append(f"{query.text!r} repeats an earlier query")
                    continue
                seen.add(query.text.lower())
                accepted.append(query)
            if len(accepted) >= budget.max_queries:
                break
            missing = budget.max_queries - len(accepted)
            note = ("; ".join(refused_now) + ". ") if refused_now else ""
            messages = [*messages, {"role": "assistant", "content": raw},
                        {"role": "user", "content": f"{note}Write {missing} more different queries that follow "
                                                    "the rules, in the same JSON form."}]
        return GenerationResult(accepted, rejected, provenance, budget.to_dict())

    @staticmethod
    def _read_queries(raw: str) -> list:
        data = load_json_object(raw)
        if "queries" not in data and {"text", "predicates"} <= set(data):
            return [data]                        # one query given bare
        items = data.get("queries")
        if not isinstance(items, list) or not items:
            raise InvalidOutput('expected {"queries": [...]} with at least one query', raw)
        return items

    # -- relations -------------------------------------------------------------------------------
    def propose_relation(self, query: QueryProposal, facts: list[Fact], *, covered: tuple[int, int] | None = None,
                         prompt_version: str | None = None) -> RelationProposal:
        check_query_argument(query)
        check_facts_argument(facts)
        prompt = task_prompt("relation", prompt_version)
        numbered = "\n".join(f"{i}. {p.name} = {p.value}" for i, p in enumerate(query.predicates, 1))
        block = facts_block(facts)
        if covered is not None:
            block += f"\n(the target is observed over frames [{covered[0]}, {covered[1]}))"
        user = prompt.user.format(text=query.text, predicates=numbered, facts=block)
        ids = {f.id for f in facts}

        def read(raw: str):
            data = load_json_object(raw)
            label = data.get("label")
            if isinstance(label, str) and label.strip().lstrip("-").isdigit():
                label = int(label)
            if label not in (1, 0, -1) or isinstance(label, bool):
                raise InvalidOutput(f"label must be 1, 0 or -1, got {data.get('label')!r}", raw)
            decisive = data.get("decisive", [])
            evidence = data.get("evidence", [])
            if not isinstance(decisive, list) or not all(isinstance(i, int) and not isinstance(i, bool)
                                                         for i in decisive):
                raise InvalidOutput("decisive must be a list of predicate numbers", raw)
            bad = [i for i in decisive if not 1 <= i <= len(query.predicates)]
            if bad:
                raise InvalidOutput(f"decisive predicate number {bad[0]} is not between 1 and {len(query.predicates)}", raw)
            if not isinstance(evidence, list) or not all(isinstance(e, str) for e in evidence):
                raise InvalidOutput("evidence must be a list of fact ids", raw)
            unknown = [e for e in evidence if e not in ids]
            if unknown:
                raise InvalidOutput(f"evidence cites {unknown[0]!r}, which is not one of the target's facts", raw)
            if label in (1, 0) and not evidence:
                raise InvalidOutput(f"label {label} needs the facts that show it as evidence", raw)
            if label == 0 and not decisive:
                raise InvalidOutput("label 0 needs the violated predicate among decisive", raw)
            reason = data.get("reason", "")
            return (label, [query.predicates[i - 1] for i in dict.fromkeys(decisive)], list(dict.fromkeys(evidence)),
                    reason if isinstance(reason, str) else "")

        value, provenance = self._ask(prompt, user, read, attempts=RELATION_MAX_ATTEMPTS,
                                      max_new_tokens=RELATION_MAX_NEW_TOKENS)
        if value is None:
            return RelationProposal(-1, [], [], "no usable answer", True, provenance)
        label, decisive, evidence, reason = value
        return RelationProposal(label, [Predicate(p.name, p.value, list(p.fact_ids)) for p in decisive], evidence,
                                reason, False, provenance)

    def prelabel(self, query: QueryProposal, candidates: Mapping[int, list[Fact]], *,
                 covered: Mapping[int, tuple[int, int]] | None = None,
                 prompt_version: str | None = None) -> list[PreLabel]:
        covered = covered or {}
        return [PreLabel(int(tid), self.propose_relation(query, list(facts), covered=covered.get(tid),
                                                         prompt_version=prompt_version))
                for tid, facts in candidates.items()]

    # -- tags ------------------------------------------------------------------------------------
    def canonicalise_tags(self, tags: list[str], *, kind: str, top_k: int = 50, max_vocabulary: int = 16,
                          prompt_version: str | None = None) -> TagCanonicalisation:
        check_tags_argument(tags, kind, top_k, max_vocabulary)
        prompt = task_prompt("tags", prompt_version)
        counts = tally(tags)
        retained = list(counts)[:top_k]
        dropped = list(counts)[top_k:]
        listing = "\n".join(f"{json.dumps(t, ensure_ascii=False)}: {counts[t]}" for t in retained)
        user = prompt.user.format(n=len(retained), kind=kind, tags=listing, max_vocabulary=max_vocabulary)

        def read(raw: str):
            data = load_json_object(raw)
            vocabulary, mapping = data.get("vocabulary"), data.get("mapping")
            if not isinstance(vocabulary, list) or not all(isinstance(v, str) and v.strip() for v in vocabulary):
                raise InvalidOutput("vocabulary must be a list of non-empty names", raw)
            vocabulary = list(dict.fromkeys(v.strip() for v in vocabulary))
            if len(vocabulary) > max_vocabulary:
                raise InvalidOutput(f"{len(vocabulary)} canonical names; at most {max_vocabulary} are allowed", raw)
            if not isinstance(mapping, dict):
                raise InvalidOutput("mapping must be an object from raw tag to canonical name", raw)
            missing = [t for t in retained if t not in mapping]
            if missing:
                raise InvalidOutput(f"raw tag {missing[0]!r} is not mapped", raw)
            outside = [t for t in retained if not isinstance(mapping[t], str) or mapping[t].strip() not in vocabulary]
            if outside:
                raise InvalidOutput(f"raw tag {outside[0]!r} maps to {mapping[outside[0]]!r}, "
                                    "which is not in the vocabulary", raw)
            return vocabulary, {t: mapping[t].strip() for t in retained}

        if not retained:
            return TagCanonicalisation(kind, [], {}, counts, dropped, False,
                                       Provenance(self.name, self.model, prompt.version, prompt.sha256()))
        value, provenance = self._ask(prompt, user, read, attempts=TAGS_MAX_ATTEMPTS,
                                      max_new_tokens=max(256, 24 * len(retained)))
        if value is None:
            return TagCanonicalisation(kind, [], {}, counts, dropped + retained, True, provenance)
        vocabulary, mapping = value
        return TagCanonicalisation(kind, vocabulary, mapping, counts, dropped, False, provenance)

    # -- rewrite (ActPair 3.4) -------------------------------------------------------------------
    def rewrite_query(self, query_text: str, *, action_tags: list[str], scene_tags: list[str],
                      prompt_version: str | None = None) -> RewriteResult:
        """The model's rewrite of the text into the template, with at most one tag of each
        vocabulary (``models.backends.llm.rewrite.read_rewrite``); no usable answer within
        :data:`REWRITE_MAX_ATTEMPTS` is a failed result, never an exception."""
        actions, scenes = check_rewrite_arguments(query_text, action_tags, scene_tags)
        prompt = task_prompt("rewrite", prompt_version)
        user = prompt.user.format(text=query_text.strip(), action_tags=vocabulary_block(actions),
                                  scene_tags=vocabulary_block(scenes), template=REWRITE_TEMPLATE)
        value, provenance = self._ask(prompt, user, lambda raw: read_rewrite(raw, actions, scenes),
                                      attempts=REWRITE_MAX_ATTEMPTS, max_new_tokens=REWRITE_MAX_NEW_TOKENS)
        if value is None:
            return RewriteResult(None, None, None, True, provenance)
        return RewriteResult(value[0], value[1], value[2], False, provenance)
