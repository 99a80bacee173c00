"""Versioned prompts of the language-model tasks (DESIGN 2.7, 2.9; ActPair 3.2).

A version's text never changes once used; a new wording is a new version. Results record the
version and :meth:`TaskPrompt.sha256`, the SHA-256 of the version's texts.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass

from models.facts import canonical_json

TASKS = ("queries", "relation", "tags", "rewrite")


@dataclass(frozen=True)
class TaskPrompt:
    """One prompt version of one task: a system text, a user template and a correction turn."""

    task: str                                    # one of TASKS
    version: str                                 # e.g. "queries-v1"
    system: str                                  # the system message
    user: str                                    # str.format template (fields per task)
    retry: str                                   # str.format template with {error}

    def sha256(self) -> str:
        body = {"task": self.task, "version": self.version, "system": self.system, "user": self.user,
                "retry": self.retry}
        return hashlib.sha256(canonical_json(body).encode()).hexdigest()


_RETRY = "That answer cannot be used: {error}. Reply again with only the corrected JSON object."

_QUERIES_V1 = TaskPrompt(
    "queries", "queries-v1",
    system=("You write search queries for a video retrieval benchmark. Each query describes one tracked "
            "target using only the verified facts you are given. Answer with one JSON object and nothing else."),
    user="""\
Verified facts about one target (frame intervals are half-open: [start_frame, end_frame)):
{facts}

Write up to {n} different natural queries that someone might type to find this target. For each \
query list its required predicates: every condition the query states, as {{"name": <fact name>, \
"value": <fact value>, "fact_ids": [<ids of the facts above that state it>]}}. Use only the facts \
above; a predicate's name and value must equal those of every fact it cites. Never describe facts \
whose intervals do not overlap as happening at the same time (say "then" for a sequence). Do not \
mention frame numbers.
Return {{"queries": [{{"text": "...", "predicates": [...]}}, ...]}}.""",
    retry=_RETRY)

_RELATION_V1 = TaskPrompt(
    "relation", "relation-v1",
    system=("You check whether a search query describes a tracked target, using only the verified facts "
            "about that target. Answer with one JSON object and nothing else."),
    user="""\
Query: {text}
Required predicates, numbered:
{predicates}
Verified facts about the target (frame intervals are half-open; a fact with "known": false says nothing):
{facts}

Label 1 when every required predicate is supported by the facts (jointly, at the same time where \
the query requires it); 0 when a known fact demonstrably violates a required predicate; -1 when \
the facts leave it unresolved. A fact that is not mentioned is not a violation.
Return {{"label": 1 or 0 or -1, "decisive": [<numbers of the predicates that decide the label>], \
"evidence": [<ids of the facts that show it>], "reason": "<one sentence>"}}.""",
    retry=_RETRY)

_TAGS_V1 = TaskPrompt(
    "tags", "tags-v1",
    system=("You organise free-form annotation tags into a small canonical vocabulary. Answer with one JSON "
            "object and nothing else."),
    user="""\
The {n} most frequent raw {kind} tags, with their counts:
{tags}

Group the tags that mean the same {kind} under one short canonical name (lower case, at most \
{max_vocabulary} names in all). Map every raw tag above, spelled exactly as above.
Return {{"vocabulary": [<canonical names>], "mapping": {{"<raw tag>": "<canonical name>", ...}}}}.""",
    retry=_RETRY)

_REWRITE_V1 = TaskPrompt(
    "rewrite", "rewrite-v1",
    system=("You rewrite pedestrian search queries into a fixed template, grounding the action in its scene. "
            "Answer with one JSON object and nothing else."),
    user="""\
Query: {text}
Canonical action tags:
{action_tags}
Canonical scene tags:
{scene_tags}

Choose the action tag and the scene tag above that best fit the query (null when none fits), then \
rewrite the query into exactly this template, keeping every detail of the query that fits it and \
adding nothing the query and the chosen tags do not say:
{template}
Return {{"action": <action tag or null>, "scene": <scene tag or null>, "rewrite": "<the rewritten query>"}}.""",
    retry=_RETRY)

PROMPTS: dict[str, TaskPrompt] = {p.version: p for p in (_QUERIES_V1, _RELATION_V1, _TAGS_V1, _REWRITE_V1)}
CURRENT = {"queries": "queries-v1", "relation": "relation-v1", "tags": "tags-v1", "rewrite": "rewrite-v1"}


def task_prompt(task: str, version: str | None) -> TaskPrompt:
    """The prompt of ``version`` for ``task`` (None: the current one); ValueError when unknown."""
    if task not in TASKS:
        raise ValueError(f"unknown task {task!r}; known: {', '.join(TASKS)}")
    key = version or CURRENT[task]
    prompt = PROMPTS.get(key)
    if prompt is None or prompt.task != task:
        known = [v for v, p in PROMPTS.items() if p.task == task]
        raise ValueError(f"unknown {task} prompt version {key!r}; known: {', '.join(known)}")
    return prompt
