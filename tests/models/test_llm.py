"""The language backends: the template verbaliser and predicate matcher, a tiny random-weight causal
LM saved and reloaded through the loader, and a local chat-completions server with scripted answers."""
from __future__ import annotations

import json

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from models.backends.llm import build_llm, resolve_llm_settings
from models.backends.llm.base import GenerationBudget, co_temporal_problems, match_predicates
from models.backends.llm.hf_local import ModelPathError
from models.backends.llm.openai_chat import ChatEndpointConfig
from models.backends.llm.prompts import PROMPTS, task_prompt
from models.backends.llm.template import RULES_VERSION, TemplateLLM, TemplateLLMConfig, tag_wording
from models.facts import Fact, Predicate, QueryProposal, check_query
from tests.models.test_vlm_openai import ChatServer
from tests.models.test_vlm_transformers import build_tiny_tokenizer


def walker_facts() -> list[Fact]:
    """Red top, blue trousers; enters from the left, walks right, stops, walks right slowly, leaves."""
    return [
        Fact("f1", "attribute", "upper_colour", "red", 0, 120, [10, 60]),
        Fact("f2", "attribute", "lower_colour", "blue", 0, 120, [10]),
        Fact("f3", "attribute", "size", "", 0, 120, known=False),
        Fact("f4", "event", "enters", "from the left", 0, 3, [0], "interval"),
        Fact("f5", "event", "walks", "right", 0, 50, [0, 25, 49], "interval"),
        Fact("f6", "attribute", "speed", "normal", 0, 50, [25], "interval"),
        Fact("f7", "event", "stands", "still", 50, 80, [60], "interval"),
        Fact("f8", "event", "walks", "right", 80, 120, [100], "interval"),
        Fact("f9", "attribute", "speed", "slow", 80, 120, [100], "interval"),
        Fact("f10", "event", "leaves", "to the right", 117, 120, [119], "interval"),
    ]


def query(text: str, *preds: tuple[str, str, list[str]]) -> QueryProposal:
    return QueryProposal(text, [Predicate(n, v, ids) for n, v, ids in preds])


# -- template: queries ---------------------------------------------------------------------------
def test_template_writes_cited_variants_from_known_facts_only():
    facts = walker_facts()
    result = TemplateLLM(TemplateLLMConfig(synonym_encoder="")).generate_queries(facts, GenerationBudget(max_queries=3))
    assert not result.failed and result.rejected == []
    texts = [q.text for q in result.queries]
    assert texts == [
        "A person wearing a red top and blue trousers.",
        "A person wearing a red top and blue trousers walking to the right at a normal pace.",
        "A person wearing a red top and blue trousers who walks to the right and then stands still.",
    ]
    # each predicate cites the facts it says, the pace cites the pace of that walk, nothing unknown
    assert [(p.name, p.value, p.fact_ids) for p in result.queries[1].predicates] == [
        ("upper_colour", "red", ["f1"]), ("lower_colour", "blue", ["f2"]), ("walks", "right", ["f5"]),
        ("speed", "normal", ["f6"])]
    for q in result.queries:
        assert check_query(q, facts) == [] and co_temporal_problems(q, facts) == []
        assert all(p.name != "size" for p in q.predicates)
    # the sequence is said with "then" and its facts follow each other
    seq = {p.name: p.fact_ids[0] for p in result.queries[2].predicates}
    assert seq == {"upper_colour": "f1", "lower_colour": "f2", "walks": "f5", "stands": "f7"}
    assert result.provenance.backend == "template" and result.provenance.prompt_version == RULES_VERSION
    assert result.provenance.attempts == 1 and json.loads(result.provenance.raw_texts[0])["queries"]
    assert result.budget == {"max_queries": 3, "max_attempts": 2, "max_new_tokens": 512}
    more = TemplateLLM(TemplateLLMConfig(synonym_encoder="")).generate_queries(facts, GenerationBudget(max_queries=10))
    assert len(more.queries) == 6 and any("enters from the left" in q.text for q in more.queries)
    json.dumps(more.to_dict())


def test_template_with_nothing_known_writes_nothing():
    facts = [Fact("f1", "attribute", "upper_colour", "", 0, 10, known=False),
             Fact("f2", "event", "walks", "", 0, 10, known=False)]
    result = TemplateLLM().generate_queries(facts)
    assert result.failed and result.queries == [] and result.rejected == []


def test_template_uses_the_category_and_unlisted_values_verbatim():
    facts = [Fact("c", "attribute", "category", "cyclist", 0, 40), Fact("u", "attribute", "upper_colour", "teal", 0, 40),
             Fact("w", "event", "walks", "diagonally", 0, 40, scope="interval")]
    texts = [q.text for q in TemplateLLM().generate_queries(facts, GenerationBudget(max_queries=5)).queries]
    assert texts[:2] == ["A cyclist wearing a teal top.", "A cyclist wearing a teal top walking diagonally."]


interval = st.tuples(st.integers(0, 60), st.integers(1, 40)).map(lambda t: (t[0], t[0] + t[1]))
fact_strategy = st.one_of(
    st.builds(lambda v, k, iv: ("attribute", "upper_colour", v, k, iv), st.sampled_from(["red", "blue"]), st.booleans(), interval),
    st.builds(lambda v, k, iv: ("attribute", "lower_colour", v, k, iv), st.sampled_from(["black", "grey"]), st.booleans(), interval),
    st.builds(lambda v, k, iv: ("event", "walks", v, k, iv), st.sampled_from(["left", "right", "away"]), st.booleans(), interval),
    st.builds(lambda v, k, iv: ("attribute", "speed", v, k, iv), st.sampled_from(["slow", "fast"]), st.booleans(), interval),
    st.builds(lambda k, iv: ("event", "stands", "still", k, iv), st.booleans(), interval),
    st.builds(lambda v, k, iv: ("event", "enters", v, k, iv), st.sampled_from(["from the left", "from the top"]), st.booleans(), interval),
)


@settings(max_examples=80, deadline=None)
@given(st.lists(fact_strategy, max_size=9), st.integers(1, 6))
def test_template_queries_are_always_supported_and_match_their_own_trajectory(raw_facts, n):
    facts = [Fact(f"f{i}", kind, name, value if known else "", a, b, known=known,
                  scope="whole" if kind == "attribute" and name.endswith("colour") else "interval")
             for i, (kind, name, value, known, (a, b)) in enumerate(raw_facts)]
    llm = TemplateLLM(TemplateLLMConfig(synonym_encoder=""))
    result = llm.generate_queries(facts, GenerationBudget(max_queries=n))
    assert len(result.queries) <= n and result.rejected == []
    known_ids = {f.id for f in facts if f.known}
    for q in result.queries:
        assert check_query(q, facts) == [] and co_temporal_problems(q, facts) == []
        assert all(set(p.fact_ids) <= known_ids for p in q.predicates)
        assert llm.propose_relation(q, facts).label == 1


# -- template: relations -------------------------------------------------------------------------
def test_relations_by_predicate_matching():
    facts = walker_facts()
    llm = TemplateLLM(TemplateLLMConfig(synonym_encoder=""))
    red_right = query("red walker", ("upper_colour", "red", ["x"]), ("walks", "right", ["y"]))
    proposal = llm.propose_relation(red_right, facts)
    assert (proposal.label, proposal.evidence_fact_ids) == (1, ["f1", "f5", "f8"]) and not proposal.failed
    assert [p.name for p in proposal.decisive] == ["upper_colour", "walks"]
    # a known other colour contradicts; the evidence is the contradicting fact
    green = llm.propose_relation(query("green", ("upper_colour", "green", ["x"]), ("walks", "right", ["y"])), facts)
    assert (green.label, [p.value for p in green.decisive], green.evidence_fact_ids) == (0, ["green"], ["f1"])
    # nothing said about an event: unresolved, unless the observed interval is covered
    crosses = query("crosses", ("crosses", "person 2", ["x"]))
    assert llm.propose_relation(crosses, facts).label == -1
    assert llm.propose_relation(query("w", ("walks", "left", ["x"])), facts, covered=(0, 120)).label == 0
    # an unknown fact contradicts nothing
    assert llm.propose_relation(query("small", ("size", "small", ["x"])), facts).label == -1
    # walking right at a slow pace happens (f8 + f9); walking right *fast* does not: the slow pace
    # contradicts, and a fast pace only during a walk left would leave the joint support unresolved
    slow_right = query("slow", ("walks", "right", ["x"]), ("speed", "slow", ["y"]))
    assert llm.propose_relation(slow_right, facts).label == 1
    split = [Fact("a", "event", "walks", "right", 0, 30, scope="interval"),
             Fact("b", "attribute", "speed", "slow", 0, 30, scope="interval"),
             Fact("c", "event", "walks", "left", 40, 70, scope="interval"),
             Fact("d", "attribute", "speed", "fast", 40, 70, scope="interval")]
    fast_right = query("fast right", ("walks", "right", ["x"]), ("speed", "fast", ["y"]))
    label, decisive, _, reason = match_predicates(fast_right, split)
    assert label == -1 and [p.name for p in decisive] == ["speed"] and "unresolved" in reason


def test_prelabels_cover_every_candidate_with_highlights():
    facts = walker_facts()
    other = [Fact("g1", "attribute", "upper_colour", "yellow", 0, 50), Fact("g2", "event", "walks", "left", 0, 50)]
    q = query("a person in red", ("upper_colour", "red", ["f1"]))
    pre = TemplateLLM(TemplateLLMConfig(synonym_encoder="")).prelabel(q, {7: facts, 9: other, 11: []})
    assert [(p.trajectory_id, p.label, p.highlights) for p in pre] == [(7, 1, ["f1"]), (9, 0, ["g1"]), (11, -1, [])]


# -- template: tags ------------------------------------------------------------------------------
def test_tags_group_by_wording_keep_the_top_k_and_cap_the_vocabulary():
    tags = (["walking"] * 5 + ["walks"] * 2 + ["a person walking"] * 2 + ["running"] * 4 + ["runs"] * 2 + ["standing"] * 3
            + ["sitting on a bench"] * 2 + ["waving"] + ["rare tag"])
    llm = TemplateLLM(TemplateLLMConfig(synonym_encoder=""))
    out = llm.canonicalise_tags(tags, kind="action", top_k=7, max_vocabulary=4)
    assert out.vocabulary == ["walking", "running", "standing", "sitting on a bench"]
    assert out.mapping == {"walking": "walking", "walks": "walking", "a person walking": "walking",
                           "running": "running", "runs": "running", "standing": "standing",
                           "sitting on a bench": "sitting on a bench"}
    assert out.dropped == ["rare tag", "waving"] and out.counts["walking"] == 5 and not out.failed
    tighter = llm.canonicalise_tags(tags, kind="action", top_k=7, max_vocabulary=2)
    assert tighter.vocabulary == ["walking", "running"] and "standing" in tighter.dropped
    assert tag_wording("A person  Walking") == "walking" and tag_wording("the") == "the"


def test_tags_merge_synonyms_with_the_packaged_sentence_encoder():
    tags = ["walking"] * 4 + ["strolling"] * 2 + ["running"] * 3 + ["jogging"] * 2 + ["riding a bicycle", "cycling"]
    out = TemplateLLM().canonicalise_tags(tags, kind="action", top_k=20, max_vocabulary=10)
    assert out.mapping["strolling"] == "walking" and out.mapping["jogging"] == "running"
    assert out.mapping["cycling"] == out.mapping["riding a bicycle"]
    assert out.mapping["walking"] != out.mapping["running"]
    assert len(out.vocabulary) == 3


def test_template_refuses_bad_arguments():
    llm = TemplateLLM(TemplateLLMConfig(synonym_encoder=""))
    with pytest.raises(ValueError, match="list of models.facts.Fact"):
        llm.generate_queries([{"id": "f1"}])
    with pytest.raises(ValueError, match="unique"):
        llm.generate_queries([Fact("f1", "attribute", "upper_colour", "red", 0, 5)] * 2)
    with pytest.raises(ValueError, match="no prompt versions"):
        llm.generate_queries(walker_facts(), prompt_version="queries-v1")
    with pytest.raises(ValueError, match="at least one predicate"):
        llm.propose_relation(QueryProposal("x", []), walker_facts())
    with pytest.raises(ValueError, match="kind"):
        llm.canonicalise_tags(["a"], kind="object")
    with pytest.raises(ValueError, match=">= 1"):
        GenerationBudget(max_queries=0)
    with pytest.raises(ValueError, match="unknown settings"):
        build_llm("template", {"noun": "x"})
    with pytest.raises(ValueError, match="unknown language backend"):
        build_llm("oracle")
    assert resolve_llm_settings("template", {})["default_noun"] == "person"


# -- prompts -------------------------------------------------------------------------------------
def test_prompt_versions_are_hashed_and_checked():
    assert task_prompt("queries", None).version == "queries-v1"
    hashes = {p.sha256() for p in PROMPTS.values()}
    assert len(hashes) == len(PROMPTS) and all(len(h) == 64 for h in hashes)
    with pytest.raises(ValueError, match="unknown relation prompt version"):
        task_prompt("relation", "queries-v1")
    with pytest.raises(ValueError, match="unknown task"):
        task_prompt("poems", None)


# -- chat-completions endpoint -------------------------------------------------------------------
def endpoint_llm(server):
    return build_llm("openai", {"base_url": server.url, "model": "tiny-lm", "timeout_s": 5})


def test_endpoint_queries_keep_refusals_with_reasons_and_ask_again():
    facts = walker_facts()
    first = json.dumps({"queries": [
        {"text": "someone in red walking right", "predicates": [
            {"name": "upper_colour", "value": "red", "fact_ids": ["f1"]},
            {"name": "walks", "value": "right", "fact_ids": ["f5"]}]},
        {"text": "someone in green", "predicates": [{"name": "upper_colour", "value": "green", "fact_ids": ["f1"]}]},
        {"text": "a slow walker going right", "predicates": [
            {"name": "walks", "value": "right", "fact_ids": ["f5"]},
            {"name": "speed", "value": "slow", "fact_ids": ["f9"]}]},
        {"text": "someone who is small", "predicates": [{"name": "size", "value": "small", "fact_ids": ["f3"]}]},
    ]})
    second = "```json\n" + json.dumps({"queries": [
        {"text": "someone in blue trousers who stops", "predicates": [
            {"name": "lower_colour", "value": "blue", "fact_ids": ["f2"]},
            {"name": "stands", "value": "still", "fact_ids": ["f7"]}]}]}) + "\n```"
    with ChatServer([first, second]) as server:
        result = endpoint_llm(server).generate_queries(facts, GenerationBudget(max_queries=2, max_attempts=3))
    assert [q.text for q in result.queries] == ["someone in red walking right", "someone in blue trousers who stops"]
    reasons = [r.reason for r in result.rejected]
    assert len(reasons) == 3
    assert "says upper_colour=red" in reasons[0]
    assert "different intervals" in reasons[1]
    assert "unknown" in reasons[2]
    assert result.provenance.attempts == 2 and result.provenance.raw_texts[1] == second
    assert result.provenance.prompt_version == "queries-v1" and result.provenance.backend == "openai"
    # the model only saw known facts, and was told what was refused
    (_, body1), (_, body2) = server.requests
    shown = body1["messages"][1]["content"]
    assert '"id": "f1"' in shown and '"id": "f3"' not in shown
    assert "says upper_colour=red" in body2["messages"][-1]["content"]


def test_endpoint_relation_retries_and_fails_to_unknown():
    facts = walker_facts()
    q = query("red walker", ("upper_colour", "red", ["f1"]), ("walks", "right", ["f5"]))
    good = json.dumps({"label": 1, "decisive": [1, 2], "evidence": ["f1", "f5"], "reason": "both hold"})
    with ChatServer([json.dumps({"label": 2}), good]) as server:
        proposal = endpoint_llm(server).propose_relation(q, facts, covered=(0, 120))
    assert (proposal.label, proposal.evidence_fact_ids, proposal.failed) == (1, ["f1", "f5"], False)
    assert [p.name for p in proposal.decisive] == ["upper_colour", "walks"]
    assert proposal.provenance.attempts == 2 and "label must be" in proposal.provenance.errors[0]
    assert "[0, 120)" in server.requests[0][1]["messages"][1]["content"]
    bad_evidence = json.dumps({"label": 0, "decisive": [1], "evidence": ["f99"]})
    no_evidence = json.dumps({"label": 1, "decisive": [1], "evidence": []})
    with ChatServer([bad_evidence, no_evidence]) as server:
        proposal = endpoint_llm(server).propose_relation(q, facts)
    assert (proposal.label, proposal.failed, proposal.decisive) == (-1, True, [])
    assert "f99" in proposal.provenance.errors[0] and "needs the facts" in proposal.provenance.errors[1]


def test_endpoint_tags_must_map_every_retained_tag():
    tags = ["walking"] * 3 + ["strolling"] * 2 + ["running"]
    missing = json.dumps({"vocabulary": ["walk"], "mapping": {"walking": "walk"}})
    good = json.dumps({"vocabulary": ["walk", "run"], "mapping": {"walking": "walk", "strolling": "walk",
                                                                  "running": "run"}})
    with ChatServer([missing, good]) as server:
        out = endpoint_llm(server).canonicalise_tags(tags, kind="action", top_k=3, max_vocabulary=2)
    assert out.vocabulary == ["walk", "run"] and out.mapping["strolling"] == "walk" and not out.failed
    assert "'strolling' is not mapped" in out.provenance.errors[0]
    too_many = json.dumps({"vocabulary": ["a", "b", "c"], "mapping": {"walking": "a", "strolling": "b", "running": "c"}})
    with ChatServer([too_many, too_many]) as server:
        out = endpoint_llm(server).canonicalise_tags(tags, kind="scene", top_k=3, max_vocabulary=2)
    assert out.failed and out.mapping == {} and sorted(out.dropped) == ["running", "strolling", "walking"]


def test_endpoint_prompt_versions_are_checked():
    llm = build_llm("openai", {"model": "m"})
    with pytest.raises(ValueError, match="unknown queries prompt version"):
        llm.generate_queries(walker_facts(), prompt_version="queries-v9")
    assert isinstance(llm.config, ChatEndpointConfig)


# -- a tiny local causal LM ----------------------------------------------------------------------
@pytest.fixture(scope="module")
def tiny_lm(tmp_path_factory):
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.set_num_threads(1)
    tokenizer = build_tiny_tokenizer()
    config = Qwen2Config(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=2048,
                         eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id)
    torch.manual_seed(0)
    folder = tmp_path_factory.mktemp("tiny_lm")
    Qwen2ForCausalLM(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return build_llm("transformers", {"model_path": str(folder), "device": "cpu"})


def test_tiny_lm_garbage_is_handled_in_every_task(tiny_lm):
    facts = walker_facts()
    result = tiny_lm.generate_queries(facts, GenerationBudget(max_queries=2, max_attempts=2, max_new_tokens=16))
    assert result.failed and result.provenance.attempts == 2 and len(result.provenance.raw_texts) == 2
    assert len(result.provenance.errors) == 2 and result.provenance.model == tiny_lm.model
    q = query("red", ("upper_colour", "red", ["f1"]))
    proposal = tiny_lm.propose_relation(q, facts)
    assert (proposal.label, proposal.failed) == (-1, True) and len(proposal.provenance.raw_texts) == 2
    tags = tiny_lm.canonicalise_tags(["walking", "running"], kind="action", top_k=5, max_vocabulary=2)
    assert tags.failed and tags.provenance.attempts == 2
    assert tiny_lm.settings()["model_type"] == "qwen2"


def test_tiny_lm_prompt_goes_through_the_chat_template(tiny_lm):
    text = tiny_lm.render([{"role": "system", "content": "S"}, {"role": "user", "content": "U"}])
    assert text == "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\n"


def test_missing_model_folder_fails_clearly(tmp_path):
    with pytest.raises(ModelPathError, match="does not exist"):
        build_llm("transformers", {"model_path": str(tmp_path / "absent")})
