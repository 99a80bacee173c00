"""Scene context in the rendered videos: objects and conditions in the spec, the per-frame truth of
what each person is near and stands on, the pixels that show it (in full frames, mostly outside the
person's box), the heuristic describer's scene readings from pixels alone, the template writer's
scene sentences and the scene predicates of the rendered benchmark."""
from __future__ import annotations

import dataclasses

import cv2
import numpy as np
import pytest

from models.backends.llm.base import GenerationBudget
from models.backends.llm.template import TemplateLLM
from models.backends.vlm import DescribeRequest
from models.backends.vlm.heuristic import HeuristicDescriber, HeuristicDescriberConfig
from models.backends.vlm.prompts import describe_prompt
from models.demo.benchmark import DemoBenchmarkConfig, build_split, person_facts
from models.demo.describe_eval import truth_track
from models.facts import ATTRIBUTES, EVENTS, Fact, predicates_label
from models.vocabulary import NEAR_NOTHING
from models.world import scene as scene_module
from models.world.facts import NEAR_DEPTH, NEAR_LATERAL
from models.world.renderer import render_frames, render_scene
from models.world.scene import (
    GroundTruth,
    PersonSpec,
    SceneObjectSpec,
    SceneSpec,
    demo_scenes,
    gt_path_for,
)

SPEED = 60.0                                     # px/s of the walker below
START_X = -20.0


def walker_scene(**changes) -> SceneSpec:
    """One person walking right along row 150 of a 320x180 plaza at SPEED px/s (6 px a frame),
    under the still, even camera (variation 0): the pixel tests compare the scene's reference view
    with the frame exactly."""
    person = PersonSpec("orange", "blue", "right", start=(START_X, 150), height=80, speed_px_s=SPEED)
    spec = SceneSpec(name="walk", width=320, height=180, fps=10, n_frames=50, seed=2, people=[person], noise=0.0,
                     variation=0.0)
    return dataclasses.replace(spec, **changes)


def foot_x(frame: int) -> float:
    return START_X + SPEED * frame / 10


def runs_of(facts, name: str) -> set[tuple[str, int, int]]:
    return {(f.value, f.start_frame, f.end_frame) for f in facts if f.name == name}


# -- the spec ------------------------------------------------------------------------------------
@pytest.mark.parametrize("change, message", [
    ({"objects": [SceneObjectSpec("fountain")]}, r"unknown scene object 'fountain'; known: \['bench', 'door'"),
    ({"conditions": ["fog"]}, r"unknown condition 'fog'; known: \['night', 'rain'\]"),
    ({"conditions": ["rain", "rain"]}, "given twice"),
    ({"objects": [SceneObjectSpec("door")]}, "a door needs a colour"),
    ({"objects": [SceneObjectSpec("door", "teal")]}, "a door needs a colour"),
    ({"objects": [SceneObjectSpec("door", "red", y=120)]}, "foot of the wall"),
    ({"objects": [SceneObjectSpec("bench", "red")]}, "only doors have a colour"),
    ({"objects": [SceneObjectSpec("bench", y=40)]}, "not on the ground"),
    ({"objects": [SceneObjectSpec("bench", x=900)]}, "outside the frame"),
    ({"objects": [SceneObjectSpec("bench", depth=10)]}, "depth is for lawns"),
    ({"objects": [SceneObjectSpec("tree"), SceneObjectSpec("tree")]}, r"more than one \['tree'\]"),
])
def test_bad_scene_context_is_refused_with_the_known_names(change, message):
    with pytest.raises(ValueError, match=message):
        walker_scene(**change).validate()


def test_placement_is_seeded_and_leaves_the_rest_of_the_scene_alone():
    objects = [SceneObjectSpec("bench"), SceneObjectSpec("door", "red"), SceneObjectSpec("door", "blue"),
               SceneObjectSpec("tree"), SceneObjectSpec("lamp_post")]
    spec = walker_scene(objects=objects, n_frames=2)
    placed = scene_module.place_objects(spec)
    assert placed == scene_module.place_objects(spec)                     # deterministic
    assert placed != scene_module.place_objects(dataclasses.replace(spec, seed=3))
    doors = [o for o in placed if o.kind == "door"]
    assert [o.name for o in doors] == ["red door", "blue door"]
    assert all(o.foot[2] == 75 for o in doors)                            # on the foot of the wall (0.42 x 180)
    assert doors[0].box[2] <= doors[1].box[0] or doors[1].box[2] <= doors[0].box[0]
    # a bench is one figure height wide at its row
    bench = placed[0]
    assert bench.box[2] - bench.box[0] == pytest.approx(spec.figure_height(bench.foot[2]), abs=0.02)
    # the people are drawn exactly as in the same scene without objects, away from the objects
    bare = next(render_frames(walker_scene(n_frames=1))).frame
    full = next(render_frames(walker_scene(objects=objects, n_frames=1))).frame
    outside = np.ones(bare.shape[:2], bool)
    for o in placed:
        x1, y1 = (max(0, int(np.floor(v))) for v in o.box[:2])
        x2, y2 = (max(0, int(np.ceil(v))) for v in o.box[2:])
        outside[y1:y2 + 1, x1:x2 + 1] = False
    assert np.array_equal(bare[outside], full[outside])


# -- the truth -----------------------------------------------------------------------------------
def test_a_walker_is_near_the_bench_only_on_the_frames_beside_it(tmp_path):
    # given a bench 60 px wide centred on x=160 whose foot is on the walker's row
    spec = walker_scene(objects=[SceneObjectSpec("bench", x=160, y=150, size=60)])
    gt = render_scene(spec, tmp_path / "bench.mp4")
    person = gt.people[0]
    present = [f for f, b in enumerate(person.boxes) if b is not None]
    reach = NEAR_LATERAL * 80                                             # the walker is 80 px tall on its row
    expected = [f for f in present if 130 - reach <= foot_x(f) <= 190 + reach]
    assert 0 < len(expected) < len(present) - 10
    # then the per-frame truth says "bench" exactly there, and the facts are those runs
    assert [f for f in present if person.near[f] == ["bench"]] == expected
    assert all(person.near[f] == [] for f in present if f not in expected)
    assert runs_of(person.facts, "near") == {("bench", expected[0], expected[-1] + 1),
                                             (NEAR_NOTHING, present[0], expected[0]),
                                             (NEAR_NOTHING, expected[-1] + 1, present[-1] + 1)}
    # a bench far behind the walker's row is near nobody
    far = render_scene(walker_scene(objects=[SceneObjectSpec("bench", x=160, y=150 - 80 * NEAR_DEPTH - 5, size=60)]),
                       tmp_path / "far.mp4")
    assert all(n == [] for n in far.people[0].near)
    # and the truth round-trips through its JSON file
    assert GroundTruth.load(gt_path_for(tmp_path / "bench.mp4")) == gt
    assert gt.objects[0].name == "bench" and gt.objects[0].foot == [130.0, 190.0, 150.0]


def test_ground_weather_and_light_per_person(tmp_path):
    # given a lawn whose columns 200..279 cover the walker's row, in the rain at night
    spec = walker_scene(objects=[SceneObjectSpec("lawn", x=240, y=165, size=80, depth=30)], conditions=["rain", "night"])
    gt = render_scene(spec, tmp_path / "lawn.mp4")
    person = gt.people[0]
    present = [f for f, b in enumerate(person.boxes) if b is not None]
    grass = [f for f in present if 200 <= foot_x(f) < 280]
    assert [f for f in present if person.ground[f] == "grass"] == grass
    assert {person.ground[f] for f in present if f not in grass} == {"pavement"}
    assert runs_of(person.facts, "ground") == {("pavement", present[0], grass[0]), ("grass", grass[0], present[-1] + 1)}
    span = (present[0], present[-1] + 1)
    assert runs_of(person.facts, "weather") == {("rain", *span)} and runs_of(person.facts, "light") == {("night", *span)}
    assert (gt.weather, gt.light) == ("rain", "night")
    # the benchmark's facts carry them, and a predicate reads them: on the grass yes, near a bench no
    facts = person_facts(person)
    assert {f.scope for f in facts if f.name in ("weather", "light")} == {"whole"}
    covered = (present[0], present[-1] + 1)
    assert predicates_label([{"name": "ground", "value": "grass"}], facts, covered=covered) == 1
    assert predicates_label([{"name": "near", "value": "bench"}], facts, covered=covered) == 0
    assert predicates_label([{"name": "weather", "value": "clear"}], facts, covered=covered) == 0


# -- the pixels ----------------------------------------------------------------------------------
def test_every_object_is_drawn_inside_its_box():
    objects = [SceneObjectSpec("bench", x=80, y=140), SceneObjectSpec("door", "red", x=60),
               SceneObjectSpec("door", "green", x=250), SceneObjectSpec("tree", x=170, y=120),
               SceneObjectSpec("lamp_post", x=290, y=170), SceneObjectSpec("lawn", x=200, y=178, size=90, depth=25)]
    empty = walker_scene(people=[], n_frames=1)
    bare = next(render_frames(empty)).frame.astype(np.int16)
    spec = dataclasses.replace(empty, objects=objects)
    drawn = next(render_frames(spec)).frame.astype(np.int16)
    changed = np.abs(drawn - bare).max(axis=2) > 12                       # [H, W]
    for o in scene_module.place_objects(spec):
        x1, y1 = max(0, round(o.box[0])), max(0, round(o.box[1]))
        x2, y2 = min(320, round(o.box[2])), min(180, round(o.box[3]))
        share = changed[y1:y2, x1:x2].mean()
        assert share > (0.8 if o.kind in ("door", "lawn") else 0.2), (o.name, share)


def test_night_is_dark_with_lit_lamps_and_rain_falls_in_thin_streaks():
    lamp = [SceneObjectSpec("lamp_post", x=160, y=170)]
    day = next(render_frames(walker_scene(objects=lamp, n_frames=1))).frame
    night = next(render_frames(walker_scene(objects=lamp, conditions=["night"], n_frames=1))).frame
    assert night.mean() < 0.6 * day.mean()
    (glass,) = scene_module.place_objects(walker_scene(objects=lamp))
    top = int(np.ceil(glass.box[1] + 0.05 * (glass.box[3] - glass.box[1])))
    assert night[top, 160].mean() > 180                                   # the lamp is lit
    dry = [t.frame.astype(np.int16) for t in render_frames(walker_scene(n_frames=3))]
    wet = [t.frame.astype(np.int16) for t in render_frames(walker_scene(conditions=["rain"], n_frames=3))]
    streaks = [np.any(w != d, axis=2) for w, d in zip(wet, dry)]
    for s, w, d in zip(streaks, wet, dry):
        assert 0.003 < s.mean() < 0.05                                    # sparse
        assert (w[s] >= d[s]).all()                                       # brighter
        opened = cv2.morphologyEx(s.astype(np.uint8), cv2.MORPH_OPEN, np.ones((3, 3), np.uint8))
        assert opened.sum() < 0.1 * s.sum()                               # thin lines, not blobs
    assert not np.array_equal(streaks[0], streaks[1])                    # falling: elsewhere on every frame


@pytest.mark.parametrize("name", ["stop_and_go", "corridor"])
def test_demo_objects_stay_mostly_outside_the_box_of_who_is_near_them(tmp_path, name):
    spec = next(s for s in demo_scenes(0, n=6) if s.name == name)
    gt = render_scene(spec, tmp_path / f"{name}.mp4")
    shares = {}
    assert len({tuple(row) for row in gt.camera}) > 1                     # the camera moves
    for o in gt.objects:
        for p in gt.people:
            for f, b in enumerate(p.boxes):
                if b is not None and o.name in p.near[f]:
                    s, tx, ty = gt.camera[f]                              # the object where this frame shows it
                    x1, y1 = max(0.0, s * o.box[0] + tx), max(0.0, s * o.box[1] + ty)
                    x2, y2 = min(gt.width, s * o.box[2] + tx), min(gt.height, s * o.box[3] + ty)
                    iw = max(0.0, min(x2, b[2]) - max(x1, b[0]))
                    ih = max(0.0, min(y2, b[3]) - max(y1, b[1]))
                    shares.setdefault(o.name, []).append(iw * ih / ((x2 - x1) * (y2 - y1)))
    assert any(n.endswith("door") for n in shares)                        # someone walks up to a door
    for n, s in shares.items():
        assert np.median(s) < 0.5, (n, np.median(s))
    assert np.mean([v for s in shares.values() for v in s]) < 0.35


# -- the heuristic describer ---------------------------------------------------------------------
@pytest.fixture(scope="module")
def lawn_videos(tmp_path_factory):
    """The walker crossing a lawn on the plaza: by day in dry weather, and at night in the rain."""
    root = tmp_path_factory.mktemp("context")
    lawn = [SceneObjectSpec("lawn", x=240, y=165, size=80, depth=30)]
    out = {}
    for key, conditions in (("day", []), ("night_rain", ["night", "rain"])):
        spec = walker_scene(objects=lawn, conditions=conditions, noise=3.0, n_frames=45)
        out[key] = (root / f"{key}.mp4", render_scene(spec, root / f"{key}.mp4"))
    return out


def _describe(path, gt):
    frames, boxes = truth_track(gt.people[0])
    return HeuristicDescriber().describe(DescribeRequest(str(path), frames, boxes))


def test_the_describer_reads_ground_light_and_rain_from_the_pixels(lawn_videos):
    for key, (path, gt) in lawn_videos.items():
        result = _describe(path, gt)
        assert not result.failed, result.errors
        facts = result.description.facts
        truth = gt.people[0]
        switch = next(f for f, g in enumerate(truth.ground) if g == "grass")
        ground = sorted((f.start_frame, f.end_frame, f.value) for f in facts if f.name == "ground")
        assert [v for _, _, v in ground] == ["pavement", "grass"], (key, ground)
        assert abs(ground[1][0] - switch) <= 2 and 0 <= ground[1][0] - ground[0][1] <= 2   # at the lawn's edge
        frames = truth_track(truth)[0]
        span = (int(frames[0]), int(frames[-1]) + 1)
        assert runs_of(facts, "light") == {(gt.light, *span)} and runs_of(facts, "weather") == {(gt.weather, *span)}
        assert {f.scope for f in facts if f.name in ("light", "weather")} == {"whole"}
        for f in facts:
            if f.name in ("light", "weather"):
                assert f.evidence_frames == result.full_frames and f.known


def test_scene_reading_settings_are_checked():
    config = HeuristicDescriberConfig.from_dict({"scene": {"night_below": 30.0, "rain_grid": [4, 6]}})
    assert config.scene.night_below == 30.0 and config.scene.rain_grid == (4, 6)
    assert config.to_dict()["scene"]["rain_grid"] == [4, 6]
    with pytest.raises(ValueError, match="clear_below <= rain_from"):
        HeuristicDescriberConfig.from_dict({"scene": {"rain_from": 0.0001, "clear_below": 0.01}})
    with pytest.raises(ValueError, match="unknown settings"):
        HeuristicDescriberConfig.from_dict({"scene": {"fog_from": 1.0}})


def test_the_describer_never_reads_the_truth(lawn_videos, tmp_path, monkeypatch):
    path, gt = lawn_videos["night_rain"]
    before = _describe(path, gt).raw_texts
    # the same pixels with a truth file that says day, dry weather, and no truth at all
    copy = tmp_path / "copy.mp4"
    copy.write_bytes(path.read_bytes())
    lie = dataclasses.replace(gt, conditions=[], objects=[])
    lie.save(gt_path_for(copy))
    assert _describe(copy, gt).raw_texts == before
    gt_path_for(copy).unlink()

    def no_truth(*args, **kwargs):
        raise AssertionError("the describer read the ground truth")

    monkeypatch.setattr(GroundTruth, "load", classmethod(no_truth))
    monkeypatch.setattr(GroundTruth, "from_json", classmethod(no_truth))
    assert _describe(copy, gt).raw_texts == before


def test_describe_v1_keeps_its_words_and_v2_names_the_scene_facts():
    args = {"n_frames": 10, "fps": 10.0, "width": 64, "height": 64, "span": (0, 10), "crop_frames": [1],
            "full_frames": [2], "observations": [(1, [0.0, 0.0, 5.0, 5.0])], "colour_names": ["red"]}
    v1 = describe_prompt("describe-v1").render(**args)
    assert "Attribute names: upper_colour, lower_colour, speed, size, position, category. Event" in v1
    current = describe_prompt(None)
    v2 = current.render(**args)
    assert current.version == "describe-v2" and current.sha256() != describe_prompt("describe-v1").sha256()
    assert all(name in v2 for name in ATTRIBUTES + EVENTS) and '"grass" or "pavement"' in v2


# -- the template writer and the benchmark ---------------------------------------------------------
def test_the_template_writer_says_scene_predicates_with_articles():
    facts = [Fact("f1", "attribute", "upper_colour", "orange", 0, 40),
             Fact("f2", "attribute", "near", NEAR_NOTHING, 0, 12, scope="interval"),
             Fact("f3", "attribute", "near", "red door", 12, 30, scope="interval"),
             Fact("f4", "attribute", "ground", "grass", 0, 40, scope="interval"),
             Fact("f5", "attribute", "weather", "rain", 0, 40),
             Fact("f6", "attribute", "light", "day", 0, 40)]
    result = TemplateLLM().generate_queries(facts, GenerationBudget(max_queries=5))
    texts = {q.text: q for q in result.queries}
    assert result.rejected == []
    scene = texts["A person wearing an orange top near the red door in the rain."]
    assert [(p.name, p.value, p.fact_ids) for p in scene.predicates] == [
        ("upper_colour", "orange", ["f1"]), ("near", "red door", ["f3"]), ("weather", "rain", ["f5"])]
    assert "A person wearing an orange top on the grass." in texts
    assert not any(NEAR_NOTHING in t or "daylight" in t for t in texts)
    # at night, without clothing facts: the subject keeps its article
    night = [Fact("f1", "attribute", "light", "night", 0, 20), Fact("f2", "attribute", "ground", "pavement", 0, 20,
                                                                     scope="interval")]
    (query,) = TemplateLLM().generate_queries(night).queries
    assert query.text == "A person on the pavement at night."


def test_the_rendered_benchmark_asks_for_scene_context(tmp_path):
    config = DemoBenchmarkConfig(videos={"train": 6}, include_demo_scenes=False, width=192, height=108, n_frames=24)
    snapshot = build_split(config, "train", tmp_path, {"video": 1, "track": 1, "query": 1})
    truth = {v.id: GroundTruth.load(gt_path_for(v.path)) for v in snapshot.videos}
    assert any(o for gt in truth.values() for o in gt.objects) and any(gt.conditions for gt in truth.values())
    tracks = {t.id: t for t in snapshot.tracks}
    asked = 0
    for q in snapshot.queries:
        t = tracks[q.target_id]
        gt = truth[t.video_id]
        person = next(p for p in gt.people if p.boxes[int(t.frames[0])] is not None
                      and np.allclose(p.boxes[int(t.frames[0])], t.boxes[0]))
        for p in q.predicates:
            if p["name"] == "near":
                assert any(p["value"] in person.near[f] for f in t.frames.tolist())
            elif p["name"] == "ground":
                assert p["value"] in {person.ground[f] for f in t.frames.tolist()}
            elif p["name"] in ("weather", "light"):
                assert p["value"] == getattr(gt, p["name"])
            else:
                continue
            asked += 1
    assert asked >= 3
