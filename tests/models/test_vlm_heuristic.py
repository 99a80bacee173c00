"""The heuristic describer on rendered scenes with known truth and on the real pedestrian video,
and the describer interface it shares with the model backends (inputs, validation, budgets)."""
from __future__ import annotations

import json

import cv2
import numpy as np
import pytest

from models import colour_naming as colour_namer_module
from models.backends.vlm import (
    DescribeBudget,
    DescribeRequest,
    build_describer,
    check_description,
    select_inputs,
)
from models.backends.vlm.base import interior_positions, uniform_positions
from models.backends.vlm.heuristic import (
    RULES_VERSION,
    HeuristicDescriber,
    HeuristicDescriberConfig,
    bgr_to_lab,
)
from models.colour_naming import BASIC_TERMS, CSS_NAMES, TERMS, colour_namer, grey_world_gains
from models.demo.describe_eval import truth_track
from models.facts import InvalidOutput
from models.vocabulary import COLOUR_WORDS
from models.world.renderer import render_scene
from models.world.scene import PersonSpec, SceneSpec
from tests.models.conftest import VTEST


def facts_named(description, name):
    return [f for f in description.facts if f.name == name]


def describe_person(describer, video, person_id, **kwargs):
    frames, boxes = truth_track(video.gt.people[person_id])
    return describer.describe(DescribeRequest(str(video.path), frames, boxes, **kwargs))


@pytest.fixture(scope="module")
def describer():
    return HeuristicDescriber()


# -- colour space --------------------------------------------------------------------------------
def test_lab_conversion_matches_the_srgb_reference_values():
    # sRGB white, pure red and mid grey under D65 (standard reference values)
    lab = bgr_to_lab(np.array([[255, 255, 255], [0, 0, 255], [119, 119, 119]], np.uint8))
    assert lab[0] == pytest.approx([100.0, 0.0, 0.0], abs=0.5)
    assert lab[1] == pytest.approx([53.24, 80.09, 67.20], abs=0.5)
    assert lab[2] == pytest.approx([50.0, 0.0, 0.0], abs=0.6)


def test_ciede2000_matches_sharmas_reference_pair():
    # Sharma, Wu and Dalal (2005), table 1, pair 1
    d = colour_namer_module._colour().delta_E(np.array([50.0, 2.6772, -79.7751]), np.array([50.0, 0.0, -82.7485]),
                                              method="CIE 2000")
    assert float(d) == pytest.approx(2.0425, abs=1e-4)


def test_every_css_name_has_one_basic_term():
    grouped = [n for names in BASIC_TERMS.values() for n in names]
    assert sorted(grouped) == sorted(CSS_NAMES) and len(TERMS) == 11


def test_css_swatches_and_their_shades_take_their_basic_terms():
    namer = colour_namer()
    swatches = {"red": (0, 0, 255), "green": (0, 128, 0), "blue": (255, 0, 0), "yellow": (0, 255, 255),
                "black": (0, 0, 0), "white": (255, 255, 255), "grey": (128, 128, 128), "orange": (0, 165, 255),
                "purple": (128, 0, 128), "pink": (203, 192, 255), "brown": (19, 69, 139)}   # BGR
    for term, bgr in swatches.items():
        assert TERMS[namer.terms(np.array([bgr], np.uint8))[0]] == term, term
    shade = (np.array([[0, 0, 255]], np.float64) * 0.7).astype(np.uint8)   # a darker red is still red
    assert TERMS[namer.terms(shade)[0]] == "red"


def test_grey_world_balances_a_tinted_scene_but_not_a_coloured_one():
    rng = np.random.default_rng(0)
    scene = np.repeat(rng.integers(60, 200, size=(40, 40, 1)), 3, axis=2).astype(np.float64)   # greys
    scene[:10] = (40, 150, 60)                                                   # and a green patch
    tinted = np.clip(scene * np.array([0.92, 1.0, 1.08]), 0, 255).astype(np.uint8)   # warm light (BGR)
    gains = grey_world_gains(tinted)
    greys = tinted[10:].reshape(-1, 3) * gains
    assert np.ptp(greys.mean(axis=0)) < 0.03 * greys.mean()
    grey_under_warm_light = np.array([[120, 130, 140]], np.uint8)
    assert TERMS[colour_namer().terms(grey_under_warm_light, gains)[0]] == "grey"
    lawn = np.full((20, 20, 3), (60, 140, 90), np.uint8)                        # a lawn is not a green light
    assert grey_world_gains(lawn).tolist() == [1.0, 1.0, 1.0]


def test_windowed_velocity_against_a_fit_per_window():
    rng = np.random.default_rng(4)
    t = np.cumsum(rng.choice([1, 1, 1, 2, 5], size=60)) / 12.0 + 100.0   # gaps, far from zero
    v = 3.0 * t + rng.normal(0, 2.0, len(t))
    fast = HeuristicDescriber._local_velocity(t, v, 0.5)
    for i in range(len(t)):
        sel = np.abs(t - t[i]) <= 0.5 + 1e-9
        expected = np.polyfit(t[sel], v[sel], 1)[0] if np.ptp(t[sel]) > 0 else 0.0
        assert fast[i] == pytest.approx(expected, rel=1e-6, abs=1e-6)


# -- rendered scenes -----------------------------------------------------------------------------
def test_rendered_people_get_their_colours_directions_paces_and_stop(describer, rendered_small):
    for person in rendered_small.gt.people:
        result = describe_person(describer, rendered_small, person.id)
        assert not result.failed, result.errors
        d = result.description
        (upper,) = facts_named(d, "upper_colour")
        (lower,) = facts_named(d, "lower_colour")
        # colours are named by the describer's own colour model, not the renderer's palette: the
        # upper body (a flat torso) reads right, the legs' shading may move the lower one a term
        assert (upper.known, upper.value) == (True, person.upper_colour)
        assert lower.value in COLOUR_WORDS or not lower.known
        assert upper.scope == "whole" and (upper.start_frame, upper.end_frame) == (
            int(truth_track(person)[0][0]), int(truth_track(person)[0][-1]) + 1)
        assert set(upper.evidence_frames) <= set(result.crop_frames) and upper.evidence_frames
        walks = facts_named(d, "walks")
        assert walks and {f.value for f in walks} == {person.direction}
        assert {f.value for f in facts_named(d, "speed")} == {person.speed_word}
        assert person.upper_colour in d.appearance
    # the third person stops on frames [12, 30): one "stands" fact covering most of it, between two walks
    stands = facts_named(describe_person(describer, rendered_small, 2).description, "stands")
    assert len(stands) == 1
    overlap = min(stands[0].end_frame, 30) - max(stands[0].start_frame, 12)
    assert overlap >= 0.7 * 18 and stands[0].scope == "interval" and stands[0].value == "still"


def test_inputs_are_recorded_chronologically_within_the_budget(describer, rendered_small):
    budget = DescribeBudget(max_crops=5, max_full_frames=2)
    result = describe_person(describer, rendered_small, 0, budget=budget)
    frames = truth_track(rendered_small.gt.people[0])[0].tolist()
    assert 1 <= len(result.crop_frames) <= 5 and result.crop_frames == sorted(result.crop_frames)
    assert set(result.crop_frames) <= set(frames)
    # the full frames (light and rain) sit at the centres of equal parts of the observations
    assert result.full_frames == [frames[p] for p in interior_positions(len(frames), 2)]
    assert result.context_frames == sorted(result.context_frames) and len(result.context_frames) == 15
    assert result.attempts == 1 and len(result.raw_texts) == 1 and result.errors == []
    assert result.backend == "heuristic" and result.prompt_version == RULES_VERSION
    assert len(result.prompt_sha256) == 64 and result.budget == budget.to_dict()
    # the raw text is the description as JSON, and the result serialises
    assert json.loads(result.raw_texts[0]) == result.description.to_dict()
    json.dumps(result.to_dict())
    # same request, same answer; other settings, other hash
    again = describe_person(describer, rendered_small, 0, budget=budget)
    assert again.raw_texts == result.raw_texts and again.prompt_sha256 == result.prompt_sha256
    other = HeuristicDescriber(HeuristicDescriberConfig(stand_speed=0.2))
    assert other.rules_sha256 != describer.rules_sha256


def test_entering_and_leaving_through_frame_edges(describer, tmp_path_factory):
    # one person walks in from the left and out on the right; the video goes on after they leave
    spec = SceneSpec(name="through", width=320, height=180, fps=12, n_frames=60, seed=5, background="park",
                     people=[PersonSpec("blue", "white", "right", start=(-25, 160), height=90, speed="fast")])
    path = tmp_path_factory.mktemp("through") / "through.mp4"
    gt = render_scene(spec, path)
    frames, boxes = truth_track(gt.people[0])
    assert frames[-1] < 59                                 # left before the end of the video
    d = describer.describe(DescribeRequest(str(path), frames, boxes)).description
    (enters,) = facts_named(d, "enters")
    (leaves,) = facts_named(d, "leaves")
    assert (enters.value, enters.start_frame) == ("from the left", int(frames[0]))
    assert (leaves.value, leaves.end_frame) == ("to the right", int(frames[-1]) + 1)
    assert {f.value for f in facts_named(d, "speed")} == {"fast"}


def test_a_person_who_never_moves_still_gets_colours_and_a_tiny_one_gets_unknowns(describer, tmp_path_factory):
    # The standing person is part of the median background, so the foreground mask is empty
    # there: the describer falls back to every pixel of the region. The tiny walker is too small.
    spec = SceneSpec(name="still_and_tiny", width=320, height=180, fps=12, n_frames=36, seed=9, background="plaza",
                     people=[PersonSpec("orange", "purple", "none", start=(90, 170), height=120),
                             PersonSpec("green", "black", "right", start=(150, 120), height=26, speed="normal")])
    path = tmp_path_factory.mktemp("still") / "still_and_tiny.mp4"
    gt = render_scene(spec, path)
    still = describer.describe(DescribeRequest(str(path), *truth_track(gt.people[0]))).description
    # the renderer's shaded orange sits between CSS darkorange and chocolate: orange or brown
    assert facts_named(still, "upper_colour")[0].value in ("orange", "brown")
    assert facts_named(still, "lower_colour")[0].value == "purple"
    assert len(facts_named(still, "position")) == 1         # said once, for the whole span
    (stands,) = facts_named(still, "stands")
    assert (stands.start_frame, stands.end_frame) == (0, 36) and not facts_named(still, "walks")
    tiny = describer.describe(DescribeRequest(str(path), *truth_track(gt.people[1])))
    colours = facts_named(tiny.description, "upper_colour") + facts_named(tiny.description, "lower_colour")
    assert [f.known for f in colours] == [False, False] and all(f.value == "" for f in colours)
    assert "unclear" in tiny.description.appearance
    assert facts_named(tiny.description, "size")[0].value == "small"


def test_too_few_observations_give_unknown_motion(describer, rendered_small):
    frames, boxes = truth_track(rendered_small.gt.people[0])
    result = describer.describe(DescribeRequest(str(rendered_small.path), frames[10:12], boxes[10:12]))
    assert not result.failed
    (walks,) = facts_named(result.description, "walks")
    assert walks.known is False and walks.value == ""
    assert not facts_named(result.description, "speed")


def test_a_gap_in_the_observations_is_not_described(describer, rendered_small):
    frames, boxes = truth_track(rendered_small.gt.people[0])
    keep = (frames < 15) | (frames >= 35)                 # nothing observed on frames 15..34
    d = describer.describe(DescribeRequest(str(rendered_small.path), frames[keep], boxes[keep])).description
    for f in facts_named(d, "walks") + facts_named(d, "speed") + facts_named(d, "stands"):
        assert f.end_frame <= 15 or f.start_frame >= 35, f


def test_towards_the_camera_needs_the_figure_to_grow(describer, rendered_small):
    # a box whose foot point moves down the frame: towards the camera only if it also grows
    frames = np.arange(0, 48, 2)
    foot = np.linspace(250, 330, len(frames))
    path = str(rendered_small.path)

    def walk(h0, h1):
        h = np.linspace(h0, h1, len(frames))
        boxes = np.column_stack([300 - 0.2 * h, foot - h, 300 + 0.2 * h, foot])
        return facts_named(describer.describe(DescribeRequest(path, frames, boxes)).description, "walks")

    assert [(f.known, f.value) for f in walk(100, 150)] == [(True, "towards")]
    assert [(f.known, f.value) for f in walk(150, 100)] == [(False, "")]


def test_bad_arguments_are_refused(describer, rendered_small):
    frames, boxes = truth_track(rendered_small.gt.people[0])
    path = str(rendered_small.path)
    with pytest.raises(ValueError, match="strictly increasing"):
        DescribeRequest(path, frames[::-1], boxes)
    with pytest.raises(ValueError, match="frames but"):
        DescribeRequest(path, frames, boxes[:-1])
    with pytest.raises(ValueError, match="no observations"):
        DescribeRequest(path, frames[:0], boxes[:0])
    with pytest.raises(ValueError, match="x2 > x1"):
        DescribeRequest(path, frames[:1], [[10, 10, 5, 20]])
    with pytest.raises(ValueError, match="max_crops"):
        DescribeBudget(max_crops=0)
    with pytest.raises(ValueError, match="the video has 48 frames"):
        describer.describe(DescribeRequest(path, [10, 60], [[1, 1, 20, 40]] * 2))
    with pytest.raises(ValueError, match="outside the 640x360 frame"):
        describer.describe(DescribeRequest(path, [10, 11], [[700, 10, 720, 60]] * 2))
    with pytest.raises(ValueError, match="no prompt versions"):
        describer.describe(DescribeRequest(path, frames, boxes, prompt_version="describe-v1"))
    with pytest.raises(ValueError, match="unknown settings"):
        build_describer("heuristic", {"stand_sped": 0.1})
    with pytest.raises(ValueError, match="unknown describing backend"):
        build_describer("magic", {})
    with pytest.raises(ValueError, match="upper_rows"):
        HeuristicDescriberConfig(upper_rows=(0.5, 0.4))


# -- the real video ------------------------------------------------------------------------------
# HOG detections of the man in jeans walking left near the top middle of vtest.avi, every third
# frame of the first two seconds (models.backends.tracking.detectors, person, default settings).
VTEST_WALKER = [(0, [500, 154, 531, 237]), (3, [492, 159, 522, 240]), (6, [485, 162, 515, 244]),
                (9, [474, 162, 505, 245]), (12, [461, 169, 490, 247]), (15, [437, 163, 471, 253]),
                (18, [430, 174, 459, 251])]


@pytest.fixture(scope="module")
def vtest_path():
    if not VTEST.is_file():
        pytest.skip(f"{VTEST} is not there")
    return str(VTEST)


def test_real_video_walker_and_tiny_box(describer, vtest_head, vtest_path):
    frames = [f for f, _ in VTEST_WALKER]
    boxes = [b for _, b in VTEST_WALKER]
    result = describer.describe(DescribeRequest(vtest_path, frames, boxes), reader=vtest_head)
    assert not result.failed, result.errors
    d = result.description
    assert [f.value for f in facts_named(d, "walks")] == ["left"]
    upper, lower = facts_named(d, "upper_colour")[0], facts_named(d, "lower_colour")[0]
    assert (upper.value if upper.known else None) in ("black", "grey", None)
    assert (lower.value if lower.known else None) in ("blue", "black", "grey", None)
    assert max(result.context_frames) < 150                # the background came from the frames it may read
    # a box a few pixels tall: no colour can be read from it
    tiny = describer.describe(DescribeRequest(vtest_path, [0, 5, 10], [[300, 400, 306, 414]] * 3),
                              reader=vtest_head)
    assert not tiny.failed
    assert [f.known for f in tiny.description.facts if f.name.endswith("_colour")] == [False, False]


# -- the interface helpers -----------------------------------------------------------------------
def test_positions_spread_over_the_observations():
    assert uniform_positions(10, 4) == [0, 3, 6, 9]
    assert uniform_positions(3, 8) == [0, 1, 2]
    assert uniform_positions(7, 1) == [3]
    assert interior_positions(10, 2) == [2, 7]
    assert interior_positions(0, 2) == [] and uniform_positions(5, 0) == []


def test_select_inputs_prefers_boxes_wholly_in_view():
    frames = np.arange(10)
    boxes = np.array([[0, 10, 30, 90]] * 3 + [[50, 10, 80, 90]] * 7, float)   # the first three touch the left edge
    request = DescribeRequest("video.mp4", frames, boxes, budget=DescribeBudget(max_crops=4, max_full_frames=1))
    crops, full = select_inputs(request, 200, 100)
    assert crops == [3, 5, 7, 9] and full == [5]
    # with too few clean boxes, every observation is a candidate
    crops, _ = select_inputs(DescribeRequest("video.mp4", frames, boxes, budget=DescribeBudget(max_crops=8)), 200, 100)
    assert crops[0] == 0 and len(crops) == 8


def test_check_description_refuses_frames_outside_the_video_or_the_trajectory():
    def answer(**fact):
        base = {"id": "f1", "kind": "attribute", "name": "upper_colour", "value": "red", "start_frame": 10,
                "end_frame": 20, "evidence_frames": [12]}
        return json.dumps({"appearance": "a", "motion": "b", "facts": [{**base, **fact}]})

    assert check_description("Here it is:\n" + answer(), n_frames=50, span=(5, 30)).facts[0].value == "red"
    with pytest.raises(InvalidOutput, match="after the video"):
        check_description(answer(end_frame=60), n_frames=50, span=(5, 30))
    with pytest.raises(InvalidOutput, match="evidence frame 70"):
        check_description(answer(evidence_frames=[70]), n_frames=50, span=(5, 30))
    with pytest.raises(InvalidOutput, match="outside the trajectory"):
        check_description(answer(start_frame=40, end_frame=45), n_frames=50, span=(5, 30))
    with pytest.raises(InvalidOutput, match="not valid JSON"):
        check_description("no json here", n_frames=50, span=(5, 30))


def test_draws_nothing_on_the_video(describer, rendered_small):
    # describing reads frames; the cached frames of a shared reader stay untouched
    from models.media.video import FrameReader

    with FrameReader(rendered_small.path) as reader:
        before = reader.read(20).copy()
        frames, boxes = truth_track(rendered_small.gt.people[1])
        describer.describe(DescribeRequest(str(rendered_small.path), frames, boxes), reader=reader)
        assert cv2.norm(reader.read(20), before) == 0
