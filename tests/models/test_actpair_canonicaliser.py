"""ActPair's tag canonicaliser (Sec. 3.2 and 4.1): raw action and scene tags become canonical
tags through a language backend, the template's rules on a CPU or an LLM behind an
OpenAI-compatible endpoint, and the action head's labels come through that vocabulary."""
from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from models.backends.llm import build_llm
from models.facts import InvalidOutput
from models.retrievers.actpair.retriever import ActPairRetrieverConfig
from models.retrievers.actpair.vocabulary import build_vocabulary_with_llm
from tests.models.test_vlm_openai import ChatServer

TINY = {"model": {"d_model": 32, "d_embed": 32, "n_layers": 1, "n_heads": 4, "ff_mult": 2, "n_actions": 6}}
RULES_ONLY = {"backend": "template", "settings": {"synonym_encoder": ""}}   # lexical rules, no encoder


def test_the_template_canonicaliser_groups_wordings_and_leaves_tags_past_its_cap_outside():
    tags = (["walks left"] * 5 + ["Walking left"] * 3 + ["walks right"] * 4 + ["stands still"] * 2
            + ["standing still"] + ["crosses the road"])
    llm = build_llm("template", RULES_ONLY["settings"])
    vocab = build_vocabulary_with_llm(tags, llm, kind="action", n_categories=2)
    assert vocab.method == "template" and vocab.canonicaliser["backend"] == "template"
    assert vocab.canonical == ["walks left", "walks right"]
    assert vocab.mapping == {"walks left": "walks left", "walking left": "walks left", "walks right": "walks right"}
    assert vocab.counts == {"walks left": 8, "walks right": 4}
    # the groups past the cap of two get no class (no label), as tags past the top K
    assert vocab.index("Walking left") == 0 and vocab.index("standing still") == -1
    wider = build_vocabulary_with_llm(tags, llm, kind="action", n_categories=4)
    assert wider.canonical == ["walks left", "walks right", "stands still", "crosses the road"]
    assert wider.mapping["standing still"] == "stands still"


def test_the_canonicaliser_setting_is_checked():
    assert ActPairRetrieverConfig().canonicaliser["backend"] == "template"     # the CPU default
    assert ActPairRetrieverConfig(canonicaliser=RULES_ONLY).canonicaliser["settings"]["synonym_encoder"] == ""
    for bad, match in (({"backend": "gpt"}, "one of"), ({"backend": "template", "extra": 1}, "one of"),
                       ({"backend": "template", "settings": {"synonym_thresold": 0.5}}, "synonym_thresold"),
                       ({"backend": "agglomerative", "settings": {"x": 1}}, "no settings"), ("template", "one of")):
        with pytest.raises(ValueError, match=match):
            ActPairRetrieverConfig(canonicaliser=bad)


@pytest.fixture(scope="module")
def model():
    from models.training.trainer import build_model

    return build_model("actpair", {**TINY, "canonicaliser": RULES_ONLY})


SNAPSHOT = SimpleNamespace(split="train", queries=[SimpleNamespace(text=t) for t in (
    "the one in red who walks to the left", "someone walking to the left", "a man who stands still",
    "someone in blue who stops", "the person who walks to the right on the road",
    "the one who enters from the right")])
PREDICATES = {1: [{"name": "upper_colour", "value": "red"}, {"name": "walks", "value": "right"}],
              2: [{"name": "stands", "value": "still"}], 3: [{"name": "upper_colour", "value": "red"}],
              4: [{"name": "crosses", "value": "the road"}]}


def _endpoint(server) -> dict:
    return {"backend": "openai", "settings": {"base_url": server.url, "model": "tiny-lm", "timeout_s": 5}}


def test_an_llm_canonicalises_the_tags_the_action_labels_come_through(model, monkeypatch):
    actions = json.dumps({"vocabulary": ["walking", "standing", "entering"], "mapping": {
        "walks left": "walking", "walks right": "walking", "stands still": "standing",
        "enters from the right": "entering"}})
    scenes = json.dumps({"vocabulary": ["street"], "mapping": {"road": "street"}})
    with ChatServer(["not an answer", actions, scenes]) as server:
        monkeypatch.setattr(model.config, "canonicaliser", ActPairRetrieverConfig(canonicaliser=_endpoint(server))
                            .canonicaliser)
        vocab = model.build_action_vocabulary(SNAPSHOT)
    assert vocab.method == "llm" and vocab.canonicaliser["backend"] == "openai"
    assert vocab.canonicaliser["model"] == "tiny-lm" and len(vocab.canonicaliser["prompt_sha256"]) == 64
    assert vocab.canonical == ["walking", "standing", "entering"]
    assert vocab.counts == {"walking": 3, "standing": 2, "entering": 1}
    assert model.config.vocabulary == vocab.to_dict() and len(vocab.centroids) == 3
    assert model.scene_vocabulary.mapping == {"road": "street"}
    # the model saw the raw tags with their counts; its unreadable first answer was asked again
    shown = server.requests[0][1]["messages"][1]["content"]
    assert '"walks left": 2' in shown and '"enters from the right": 1' in shown and len(server.requests) == 3
    assert '"road": 1' in server.requests[2][1]["messages"][1]["content"]
    # y_act of a training query: its first required event's tag, through the LLM's mapping
    labels = model.action_labels(SimpleNamespace(query_predicates=PREDICATES), [1, 2, 3, 4])
    assert labels.tolist() == [0, 1, -1, -1]


def test_an_unusable_llm_answer_is_a_clear_error_with_the_raw_text(model, monkeypatch):
    before = model.config.vocabulary
    incomplete = json.dumps({"vocabulary": ["walking"], "mapping": {"walks left": "walking"}})
    with ChatServer(["{not json", incomplete]) as server:
        monkeypatch.setattr(model.config, "canonicaliser", ActPairRetrieverConfig(canonicaliser=_endpoint(server))
                            .canonicaliser)
        with pytest.raises(InvalidOutput, match="no usable action canonicalisation") as info:
            model.build_action_vocabulary(SNAPSHOT)
    assert "{not json" in info.value.raw and "walks left" in info.value.raw
    assert model.config.vocabulary == before                   # nothing half-built was kept


def test_the_rule_canonicaliser_runs_by_default_without_a_model(model):
    vocab = model.build_action_vocabulary(SNAPSHOT)
    assert vocab.method == "template" and vocab.canonicaliser["backend"] == "template"
    assert vocab.mapping == {t: t for t in ("walks left", "stands still", "walks right", "enters from the right")}
    labels = model.action_labels(SimpleNamespace(query_predicates=PREDICATES), [1, 2, 3])
    assert labels.tolist() == [vocab.canonical.index("walks right"), vocab.canonical.index("stands still"), -1]
