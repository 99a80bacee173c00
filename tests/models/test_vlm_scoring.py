"""The VLM scorer interface and the heuristic pixel scorer on rendered scenes; the VLM rerank term.

The heuristic scorer must rank the person a query describes above the others from pixels and
boxes alone, score each axis separately, count its requests, refuse bad settings, and read
nothing human-side: its request type has no field for it, and perturbing every human-side record
of a snapshot changes no score. The answer readers of ``scoring.py`` (yes/no, top log-probs,
0-100 JSON) are checked against hand-computed values.
"""
from __future__ import annotations

import copy
import dataclasses
import math

import numpy as np
import pytest

from models.backends.vlm import (
    SCORERS,
    ScoreRequest,
    ScoreResult,
    build_scorer,
    resolve_scorer_settings,
)
from models.backends.vlm.scoring import (
    NEUTRAL_P_YES,
    NEUTRAL_SCORE,
    holistic_from_answer,
    parse_scores,
    yes_no_from_top_logprobs,
)
from models.demo.describe_eval import truth_track
from models.retrievers.rerank import attribute_vlm_score, minmax_rows, rerank_blend
from models.retrievers.vlm_rerank import score_requests, vlm_term, vlm_term_rows
from models.training.snapshot import (
    Relation,
    RelationSnapshotData,
    SnapshotQuery,
    SnapshotTrack,
    SnapshotVideo,
)
from models.world.renderer import render_scene
from models.world.scene import PersonSpec, SceneSpec

HUMAN_SIDE = ("description", "fact", "predicate", "vote", "label", "relation", "target", "approved")


def request_for(video, person: int, query: str) -> ScoreRequest:
    frames, boxes = truth_track(video.gt.people[person])
    return ScoreRequest(query, str(video.path), frames, boxes, trajectory_id=person)


@pytest.fixture(scope="module")
def scorer():
    return build_scorer("heuristic", {})


def snapshot_of(video) -> RelationSnapshotData:
    """The rendered small scene as a snapshot: its three people as tracks, queries written for
    them with their predicates and targets, and verified relations."""
    spec = video.spec
    tracks = []
    for i, person in enumerate(video.gt.people):
        frames, boxes = truth_track(person)
        tracks.append(SnapshotTrack(10 + i, 1, frames.astype(np.int32), boxes.astype(np.float32)))
    queries = [SnapshotQuery(100, 1, "a person in a red top walking right",
                             [{"name": "upper_colour", "value": "red", "fact_ids": ["f1"]}], target_id=10),
               SnapshotQuery(101, 1, "a person in a yellow top walking left",
                             [{"name": "walks", "value": "left", "fact_ids": ["f2"]}], target_id=11)]
    relations = [Relation(100, 10, 1), Relation(100, 11, 0), Relation(101, 11, 1), Relation(101, 12, 0)]
    return RelationSnapshotData("dev", [SnapshotVideo(1, str(video.path), spec.width, spec.height, spec.fps,
                                                      spec.n_frames)], tracks, queries, relations, {"built": "here"})


# -- the heuristic pixel scorer ------------------------------------------------------------------
def test_a_matching_query_outranks_a_mismatching_one(scorer, rendered_small):
    # person 0: red top, walks right; person 1: yellow top, walks left
    query = "a person in a red top walking right"
    red, yellow = (scorer.score(request_for(rendered_small, p, query)) for p in (0, 1))
    assert red.p_yes > yellow.p_yes and red.appearance > yellow.appearance and red.action > yellow.action
    assert red.appearance >= 80 and yellow.appearance <= 20 and red.action >= 80 and yellow.action <= 20
    assert red.scene == yellow.scene == 100.0               # the query names no scene: nothing to contradict
    vlm = attribute_vlm_score(*np.array([red.vlm_inputs(), yellow.vlm_inputs()]).T)
    assert vlm[0] > vlm[1]
    # the other way round for the yellow person's query
    query = "a person in a yellow top walking left"
    red, yellow = (scorer.score(request_for(rendered_small, p, query)) for p in (0, 1))
    assert yellow.p_yes > red.p_yes and yellow.appearance > red.appearance and yellow.action > red.action
    assert red.holistic_source == "heuristic" and red.invalid == [] and red.calls == 0
    assert red.prompt_version == "heuristic-score-v2" and len(red.prompt_sha256) == 64


def test_the_axes_are_scored_separately(scorer, rendered_small):
    # right colour, wrong direction, and the other way round
    query = "a person in a red top walking left"
    red, yellow = (scorer.score(request_for(rendered_small, p, query)) for p in (0, 1))
    assert red.appearance > 80 > yellow.appearance and yellow.action > 80 > red.action
    assert set(red.details["cues"]) == {"upper_colour=red", "walks=left"}
    # the third person walks right slowly and stands for 1.5 s: "stops" and "slowly" are hers
    query = "someone walking slowly to the right who stops"
    scores = [scorer.score(request_for(rendered_small, p, query)).action for p in range(3)]
    assert scores[2] == max(scores) and scores[2] > scores[0] + 20
    # the holistic score is the product of the axes, clipped to [0.01, 0.99]
    r = scorer.score(request_for(rendered_small, 2, query))
    expected = np.clip(r.appearance * r.action * r.scene / 1e6, 0.01, 0.99)
    assert r.log_p_yes == pytest.approx(math.log(expected))


def test_scene_cues_are_read_from_the_frames(tmp_path, scorer):
    people = [PersonSpec("red", "blue", "right", start=(40, 90), height=50),      # on the park's lawn
              PersonSpec("green", "black", "left", start=(280, 150), height=70)]  # on its paved path
    park = SceneSpec(name="park", width=320, height=180, fps=12, n_frames=24, seed=3, background="park",
                     people=people)
    night = dataclasses.replace(park, name="night", conditions=["night"])
    videos = {}
    for spec in (park, night):
        gt = render_scene(spec, tmp_path / f"{spec.name}.mp4")
        videos[spec.name] = [ScoreRequest("x", str(tmp_path / f"{spec.name}.mp4"), *truth_track(p)) for p in gt.people]

    def scene(name: str, person: int, query: str) -> float:
        return scorer.score(dataclasses.replace(videos[name][person], query=query)).scene

    assert scene("park", 0, "a person on the grass") > 80 > 20 > scene("park", 1, "a person on the grass")
    assert scene("park", 1, "a person on the pavement") > 80 > 20 > scene("park", 0, "a person on the pavement")
    assert scene("night", 0, "a person at night") > 80 > 20 > scene("park", 0, "a person at night")
    assert scene("park", 0, "a person in daylight") > 80 > 20 > scene("night", 0, "a person in daylight")


def test_unreadable_cues_are_unknown_not_invented(scorer, rendered_small):
    frames, boxes = truth_track(rendered_small.gt.people[0])
    # three observations: too few to tell how it moves; the colour is still read
    r = scorer.score(ScoreRequest("a person in a red top walking right", str(rendered_small.path), frames[:3],
                                  boxes[:3]))
    assert r.details["cues"]["walks=right"] is None and r.action == 50.0
    assert r.details["cues"]["upper_colour=red"] > 80


# -- what goes in ---------------------------------------------------------------------------------
def test_the_request_has_no_field_for_human_side_records():
    names = {f.name for f in dataclasses.fields(ScoreRequest)}
    assert names == {"query", "video_path", "frames", "boxes", "fps", "trajectory_id"}
    assert not [n for n in names if any(word in n for word in HUMAN_SIDE)]
    with pytest.raises(TypeError):
        ScoreRequest("a person", "v.mp4", [0, 1], [[0, 0, 1, 1]] * 2, description="a red top")  # type: ignore[call-arg]


def test_scores_do_not_change_when_human_side_records_are_perturbed(scorer, rendered_small):
    snapshot = snapshot_of(rendered_small)
    perturbed = copy.deepcopy(snapshot)
    for q in perturbed.queries:                  # other predicates, other targets
        q.predicates = [{"name": "upper_colour", "value": "green", "fact_ids": ["f9"]}]
        q.target_id = 12
    for r in perturbed.relations:                # every label flipped
        r.label = 1 - r.label if r.label in (0, 1) else r.label
    perturbed.meta = {"built": "elsewhere"}
    assert perturbed.content_sha256() != snapshot.content_sha256()

    def strip(term):
        return [{k: v for k, v in r.to_dict().items() if k != "seconds"} for r in term.results]

    ids = [10, 11, 12]
    for text in ("a person in a red top walking right", "a person in a yellow top walking left"):
        terms = [vlm_term(build_scorer("heuristic", {}), view, text, ids)
                 for view in (snapshot.model_inputs(), perturbed.model_inputs(), snapshot)]
        assert all(np.array_equal(terms[0].values, t.values) for t in terms[1:])
        assert all(strip(terms[0]) == strip(t) for t in terms[1:])
    requests = score_requests(snapshot.model_inputs(), "a person", ids)
    assert [r.trajectory_id for r in requests] == ids and requests[0].fps == rendered_small.spec.fps


# -- counts and the rerank term ------------------------------------------------------------------
def test_requests_are_counted_and_the_term_feeds_the_blend(rendered_small):
    scorer = build_scorer("heuristic", {})
    snapshot = snapshot_of(rendered_small).model_inputs()
    queries = ["a person in a red top walking right", "a person in a yellow top walking left"]
    shortlists = np.array([[11, 10, 12], [10, 12, 11]])                       # [Q, M]
    vlm, counts = vlm_term_rows(scorer, snapshot, queries, shortlists)
    assert vlm.shape == (2, 3) and ((vlm >= 0) & (vlm <= 1)).all()
    assert counts.requests == 6 == scorer.counts.requests and counts.calls == 0
    assert counts.holistic_sources == {"heuristic": 6} and counts.invalid_results == 0
    # each query's own person tops its shortlist, and stays on top after the blend
    assert vlm[0].argmax() == 1 and vlm[1].argmax() == 2
    blended = rerank_blend(np.zeros((2, 3)), vlm, np.zeros((2, 3)))
    assert blended[0].argmax() == 1 and blended[1].argmax() == 2
    term = vlm_term(scorer, snapshot, queries[0], [10])
    assert term.counts.requests == 1 and scorer.counts.requests == 7
    assert term.values[0] == 0.0                         # one candidate: both halves are constant rows
    three = vlm_term(build_scorer("heuristic", {}), snapshot, queries[0], [10, 11, 12])
    assert np.allclose(three.log_p_yes, [r.log_p_yes for r in three.results])       # the log, not P(yes)
    assert np.allclose(three.values, attribute_vlm_score(three.log_p_yes, three.appearance, three.action, three.scene))
    holistic = minmax_rows(three.log_p_yes[None, :])[0]
    geometric = minmax_rows(np.cbrt(three.appearance * three.action * three.scene)[None, :])[0]
    assert np.allclose(three.values, 0.5 * holistic + 0.5 * geometric)
    with pytest.raises(KeyError, match="not a track"):
        vlm_term(scorer, snapshot, queries[0], [99])
    with pytest.raises(ValueError, match=r"\[Q, M\]"):
        vlm_term_rows(scorer, snapshot, queries, [10, 11])


# -- settings ------------------------------------------------------------------------------------
def test_bad_settings_are_refused(tmp_path):
    assert set(SCORERS) == {"heuristic", "transformers", "openai"}
    with pytest.raises(ValueError, match="unknown scoring backend"):
        build_scorer("oracle", {})
    with pytest.raises(ValueError, match="unknown settings"):
        build_scorer("heuristic", {"max_crop": 4})
    with pytest.raises(ValueError, match="max_crops"):
        build_scorer("heuristic", {"max_crops": 0})
    with pytest.raises(ValueError, match="night_below"):
        build_scorer("heuristic", {"night_below": 50, "day_from": 40})
    with pytest.raises(ValueError, match="unknown settings"):
        build_scorer("openai", {"model": "m", "logprobs": True})
    with pytest.raises(ValueError, match="top_logprobs"):
        build_scorer("openai", {"model": "m", "top_logprobs": 50})
    with pytest.raises(ValueError, match="model must name"):
        build_scorer("openai", {})
    with pytest.raises(ValueError, match="unknown scoring prompt version"):
        build_scorer("openai", {"model": "m", "prompt_version": "score-v0"})
    with pytest.raises(ValueError, match="does not exist"):
        build_scorer("transformers", {"model_path": str(tmp_path / "nowhere")})
    with pytest.raises(ValueError, match="a word cannot spell both"):
        build_scorer("transformers", {"model_path": "x", "yes_words": ["yes"], "no_words": ["yes"]})
    settings = resolve_scorer_settings("heuristic", {"max_crops": 4})
    assert settings["max_crops"] == 4 and resolve_scorer_settings("heuristic", settings) == settings
    with pytest.raises(ValueError, match="query text is empty"):
        ScoreRequest("  ", "v.mp4", [0], [[0, 0, 1, 1]])
    with pytest.raises(ValueError, match="strictly increasing"):
        ScoreRequest("a person", "v.mp4", [1, 0], [[0, 0, 1, 1]] * 2)


# -- reading answers -----------------------------------------------------------------------------
def test_answers_that_are_not_scores_are_invalid_marks():
    scores, reasons = parse_scores('Sure! {"appearance": 80, "action": 35.5, "scene": 100} Hope this helps.')
    assert scores == {"appearance": 80.0, "action": 35.5, "scene": 100.0} and reasons == []
    scores, reasons = parse_scores("The target looks like a good match.")
    assert scores == {"appearance": None, "action": None, "scene": None} and reasons[0].startswith("scores:")
    scores, reasons = parse_scores('{"appearance": 120, "action": "high", "scene": true}')
    assert scores == {"appearance": None, "action": None, "scene": None}
    assert [r.split(":")[0] for r in reasons] == ["appearance", "action", "scene"]
    scores, reasons = parse_scores('{"appearance": 70, "action": 10}')
    assert scores == {"appearance": 70.0, "action": 10.0, "scene": None}
    assert reasons == ["scene: missing from the answer"]

    assert holistic_from_answer("Yes.") == (math.log(0.99), None)
    assert holistic_from_answer("**No**, the top is yellow.") == (math.log(0.01), None)
    value, reason = holistic_from_answer("Maybe")
    assert value is None and reason.startswith("holistic:")

    # spellings summed in probability; a word missing from the top k gets the smaller bound
    top = [("Yes", math.log(0.6)), (" yes", math.log(0.1)), ("No", math.log(0.2)), ("Maybe", math.log(0.05))]
    yes, no = yes_no_from_top_logprobs(top)
    assert yes == pytest.approx(math.log(0.7)) and no == pytest.approx(math.log(0.2))
    yes, no = yes_no_from_top_logprobs([("No", math.log(0.7)), ("Maybe", math.log(0.2))])
    assert no == pytest.approx(math.log(0.7)) and yes == pytest.approx(math.log(0.1))     # 1 - 0.9 < 0.2
    assert yes_no_from_top_logprobs([("Maybe", -0.1), ("Perhaps", -3.0)]) is None


def test_a_result_without_a_value_reads_as_neutral():
    result = ScoreResult(log_p_yes=None, holistic_source=None, appearance=None, action=30.0, scene=None,
                         invalid=["holistic: x", "scores: y"], raw_texts=["x", "y"], calls=2, crop_frames=[0],
                         full_frames=[], prompt_version="score-v1", prompt_sha256="0" * 64, backend="openai",
                         model="m")
    assert result.p_yes is None and result.vlm_inputs() == (math.log(NEUTRAL_P_YES), NEUTRAL_SCORE, 30.0,
                                                            NEUTRAL_SCORE)
    with pytest.raises(ValueError, match="log-probability"):
        dataclasses.replace(result, log_p_yes=0.5, holistic_source="logprob")
    with pytest.raises(ValueError, match="together"):
        dataclasses.replace(result, log_p_yes=-1.0)
    with pytest.raises(ValueError, match=r"\[0, 100\]"):
        dataclasses.replace(result, action=101.0)
