"""A small text-to-trajectory benchmark rendered from synthetic scenes with exact ground truth.

No data set can be downloaded here, so training and evaluation are exercised end to end on videos
the project renders itself (``models.world.renderer``). For each split (train / dev / test) this
module renders seeded scenes of 3-5 walking people with random clothing colours, directions,
paces and stops, and seeded scene context (benches, doors, trees, lamp posts, lawns, rain, night:
:func:`scene_context`; the test split also gets the three fixed ``demo_scenes``) and builds a
:class:`~models.training.snapshot.RelationSnapshotData`:

- **Tracks** (each video's pool): every person's ground-truth boxes on the frames where at least
  ``min_visible`` of the silhouette is visible (nothing interpolated); people with fewer than
  ``min_observations`` such frames get no track.
- **Queries**: deterministic texts from one person's ground-truth facts (clothing colours,
  walking direction, pace, a stop, and scene context: the object the person is near, the ground,
  rain, night; a scene fact is only joined to clothing colours, which hold over the whole track,
  never to a walk it may not overlap), with their predicates in the ``models.facts`` format citing
  the person's facts (one fact per predicate, so no predicate fuses intervals; every query passes
  ``check_query``). A template is used only when it singles out its person in the video: label 1
  for the target and no other label 1 in the pool (DESIGN 2.8 rejects a query that matches several
  trajectories). Dev and test queries also need a fully binary row over their video's pool.
  Up to ``queries_per_person`` templates per person, in a fixed order.
- **Relations** from ``models.facts.predicates_label`` against each track's facts, with the
  track's observed interval as coverage: every (query, track) pair of the query's video (1, 0 or
  ⊥), and the binary pairs with tracks of the other videos of the split (⊥ is not recorded:
  it is the default). Source ``ground_truth``; stratum ``within`` in the video, across videos
  ``potential_match`` for 1, ``hard_negative`` for a 0 sharing at least one required value with
  the query, else ``easy_negative``.

Ids are unique across the three splits. Videos are rendered once into ``<root>/videos`` (a file
whose ground truth is already there is reused) and the snapshots saved under
``<root>/snapshots/<split>``.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from models.config import PlainConfig
from models.facts import Fact, Predicate, QueryProposal, check_query, predicates_label
from models.training.snapshot import (
    Relation,
    RelationSnapshotData,
    SnapshotQuery,
    SnapshotTrack,
    SnapshotVideo,
)
from models.vocabulary import (
    DIRECTION_PHRASES,
    GROUND_PHRASES,
    LIGHT_PHRASES,
    NEAR_NOTHING,
    WEATHER_PHRASES,
    near_phrase,
)
from models.wording import with_article
from models.world.figures import ground_row
from models.world.palette import COLOURS
from models.world.renderer import render_scene
from models.world.scene import (
    GroundTruth,
    PersonSpec,
    PersonTruth,
    SceneObjectSpec,
    SceneSpec,
    demo_scenes,
    gt_path_for,
)

SPLITS = ("train", "dev", "test")
WALK_DIRECTIONS = ("left", "right", "towards", "away")
PACES = ("slow", "normal", "fast")
UPPER_WORDS = ("top", "shirt", "jacket")
LOWER_WORDS = ("{} trousers", "{} pants", "{} skirt")        # "in ..." of a lower-body colour
SOMEONE = ("a person", "someone", "a pedestrian")
DOOR_COLOURS = ("red", "blue", "green", "yellow")
# Chances of each piece of scene context in a generated scene (scene_context).
CONTEXT_CHANCES = {"bench": 0.6, "door": 0.6, "second_door": 0.5, "tree": 0.35, "lamp_post": 0.3, "lawn": 0.5,
                   "rain": 0.3, "night": 0.2}
# Facts that hold over the whole visible span (scope "whole").
WHOLE_SCOPE = ("upper_colour", "lower_colour", "weather", "light")
THE_ONE = ("the person", "the one", "the pedestrian")
# The demo budget: a training run sized for this benchmark on one CPU core (about two minutes), an
# override of the paper's recipe (the TrainConfig defaults: 1000 steps of 32 groups at 5e-5): 300
# steps of 16 groups, a narrower VTrajEmbed (width 128) and a larger learning rate, since 5e-5 is for
# LoRA on a 4B-parameter language backbone, not for small modules trained from scratch. Everything
# else (gradient clipping, the logit-scale cap) stays the paper's. The benchmarks at full size
# (tests/benchmarks, TRAJLAB_BENCH_FULL=1) train with it. A ``models.training.trainer.TrainConfig``.
DEMO_BUDGET = "demo budget"
DEMO_TRAIN_CONFIG = {
    "steps": 300, "batch_size": 16, "lr": 1e-3, "warmup_steps": 20, "checkpoint_every": 100, "device": "cpu",
    "model": {"d_model": 128, "d_context": 128, "agg_width": 128, "agg_ff": 256, "embed_dim": 128},
}


@dataclass
class DemoBenchmarkConfig(PlainConfig):
    """How large the rendered benchmark is (defaults: trains in about a minute on one CPU core)."""

    seed: int = 0                                # seeds scenes, colours, choreography
    videos: dict = field(default_factory=lambda: {"train": 24, "dev": 4, "test": 6})  # generated videos per split
    include_demo_scenes: bool = True             # add models.world.scene.demo_scenes() to the test split
    width: int = 320                             # frame width of generated scenes, px
    height: int = 180                            # frame height of generated scenes, px
    fps: float = 10.0                            # frame rate of generated scenes
    n_frames: int = 40                           # frames per generated scene
    people: tuple[int, int] = (3, 5)             # people per generated scene, inclusive range
    stop_probability: float = 0.3                # chance that a person stops once
    min_visible: float = 0.25                    # visible fraction for a frame to be an observation
    min_observations: int = 4                    # fewer observations: the person has no track
    queries_per_person: int = 3                  # templates kept per person (in the fixed order)

    def __post_init__(self) -> None:
        self.people = tuple(int(p) for p in self.people)
        problems = []
        if set(self.videos) - set(SPLITS) or any(int(n) < 0 for n in self.videos.values()):
            problems.append(f"videos must map splits {SPLITS} to counts >= 0, got {self.videos}")
        if self.width < 64 or self.height < 64:
            problems.append(f"frame {self.width}x{self.height} is too small (min 64x64)")
        if self.n_frames < 8:
            problems.append(f"n_frames must be >= 8, got {self.n_frames}")
        if not 1 <= self.people[0] <= self.people[1]:
            problems.append(f"people must be an increasing range starting at >= 1, got {self.people}")
        if not 0.0 <= self.stop_probability <= 1.0 or not 0.0 <= self.min_visible <= 1.0:
            problems.append("stop_probability and min_visible must be in [0, 1]")
        if self.min_observations < 1 or self.queries_per_person < 1:
            problems.append("min_observations and queries_per_person must be >= 1")
        if problems:
            raise ValueError("DemoBenchmarkConfig: " + "; ".join(problems))


# -- scenes ------------------------------------------------------------------------------------------
def generated_scene(config: DemoBenchmarkConfig, split: str, index: int) -> SceneSpec:
    """One seeded scene of the split: random people walking across, towards or away, some stopping."""
    key = f"{config.seed}:{split}:{index}".encode()
    rng = np.random.default_rng(int.from_bytes(hashlib.sha256(key).digest()[:8], "little"))
    w, h, n = config.width, config.height, config.n_frames
    horizon = -0.6 * h
    colours = sorted(COLOURS)
    people = []
    for _ in range(int(rng.integers(config.people[0], config.people[1] + 1))):
        direction = WALK_DIRECTIONS[int(rng.integers(len(WALK_DIRECTIONS)))]
        if direction == "right":
            start = (float(rng.uniform(-0.1, 0.5) * w), float(rng.uniform(0.62, 0.98) * h))
        elif direction == "left":
            start = (float(rng.uniform(0.5, 1.1) * w), float(rng.uniform(0.62, 0.98) * h))
        elif direction == "towards":
            start = (float(rng.uniform(0.15, 0.85) * w), float(rng.uniform(0.55, 0.72) * h))
        else:
            start = (float(rng.uniform(0.15, 0.85) * w), float(rng.uniform(0.85, 1.0) * h))
        height = 0.5 * h * (start[1] - horizon) / (h - horizon)           # ground-plane perspective
        stops = []
        if rng.random() < config.stop_probability:
            a = int(rng.integers(n // 8, max(n // 8 + 1, n - n // 3)))
            stops = [(a, a + int(rng.integers(n // 5, n // 3 + 1)))]
        upper, lower = rng.choice(len(colours), size=2, replace=False)
        people.append(PersonSpec(colours[upper], colours[lower], direction, start=start, height=float(height),
                                 speed=PACES[int(rng.integers(len(PACES)))], stops=stops,
                                 enter_frame=int(rng.integers(0, n // 6)) if rng.random() < 0.3 else 0,
                                 skin=int(rng.integers(4)), hair=int(rng.integers(4))))
    spec = SceneSpec(name=f"demo_{split}_{index:03d}", width=w, height=h, fps=config.fps, n_frames=n,
                     seed=int(rng.integers(2**31)), people=people,
                     background="plaza" if rng.random() < 0.5 else "park")
    context = np.random.default_rng(int.from_bytes(hashlib.sha256(key + b":scene").digest()[:8], "little"))
    spec.objects, spec.conditions = scene_context(spec, context)
    return spec


def scene_context(spec: SceneSpec, rng: np.random.Generator) -> tuple[list[SceneObjectSpec], list[str]]:
    """Seeded scene objects and conditions for a generated scene (:data:`CONTEXT_CHANCES`).

    A bench goes a little behind the row of someone walking across (so people pass it); a door
    goes just beside the path of someone walking away (so they walk up to it, and their box does
    not cover it), red half of the time, and a second
    door of another colour may join it (so "the red door" tells two doors apart); trees,
    lamp posts (always at night) and, on the plaza, a lawn across the walkers' rows are placed from
    the scene seed. Rain and night are drawn independently.
    """
    w, h = spec.width, spec.height
    objects: list[SceneObjectSpec] = []
    across = [p for p in spec.people if p.direction in ("left", "right")]
    away = [p for p in spec.people if p.direction == "away"]
    if rng.random() < CONTEXT_CHANCES["bench"]:
        row = float(across[int(rng.integers(len(across)))].start[1]) - 0.03 * h if across else None
        objects.append(SceneObjectSpec("bench", x=float(rng.uniform(0.2, 0.8) * w) if across else None,
                                       y=min(row, float(h)) if row is not None else None))
    if rng.random() < CONTEXT_CHANCES["door"]:
        others = [DOOR_COLOURS[int(k)] for k in rng.permutation(len(DOOR_COLOURS)) if DOOR_COLOURS[k] != "red"]
        colours = ["red", *others] if rng.random() < 0.5 else others
        x = None
        if away:                                     # beside the walker's path: near it, outside its box
            f = spec.figure_height(ground_row(spec.background, h))
            x = float(np.clip(away[0].start[0] + (1 if rng.random() < 0.5 else -1) * 0.4 * f, 0.1 * w, 0.9 * w))
        objects.append(SceneObjectSpec("door", colours[0], x=x))
        if rng.random() < CONTEXT_CHANCES["second_door"]:
            objects.append(SceneObjectSpec("door", colours[1]))
    for kind in ("tree", "lamp_post"):
        if rng.random() < CONTEXT_CHANCES[kind]:
            objects.append(SceneObjectSpec(kind))
    lawn = rng.random() < CONTEXT_CHANCES["lawn"]
    if lawn and spec.background == "plaza" and across:
        row = float(min(max(p.start[1] for p in across) + 0.04 * h, h))
        objects.append(SceneObjectSpec("lawn", x=float(rng.uniform(0.3, 0.7) * w), y=row,
                                       size=float(rng.uniform(0.25, 0.4) * w), depth=0.25 * h))
    conditions = [c for c in ("rain", "night") if rng.random() < CONTEXT_CHANCES[c]]
    if "night" in conditions and not any(o.kind == "lamp_post" for o in objects):
        objects.append(SceneObjectSpec("lamp_post"))
    return objects, conditions


def split_scenes(config: DemoBenchmarkConfig, split: str) -> list[SceneSpec]:
    scenes = [generated_scene(config, split, i) for i in range(int(config.videos.get(split, 0)))]
    if split == "test" and config.include_demo_scenes:
        for spec in demo_scenes(config.seed):
            scenes.append(dataclasses.replace(spec, name=f"demo_test_{spec.name}"))
    return scenes


def render_cached(spec: SceneSpec, folder: Path) -> tuple[Path, GroundTruth]:
    """Render ``spec`` into ``folder`` unless a video of exactly this spec is there already."""
    digest = hashlib.sha256(json.dumps(dataclasses.asdict(spec), sort_keys=True, default=list).encode()).hexdigest()
    path = folder / f"{spec.name}-{digest[:10]}.mp4"
    gt_file = gt_path_for(path)
    if path.is_file() and gt_file.is_file():
        return path, GroundTruth.load(gt_file)
    return path, render_scene(spec, path)


# -- facts and queries -----------------------------------------------------------------------------
def person_facts(person: PersonTruth) -> list[Fact]:
    """The person's ground-truth facts as ``models.facts.Fact`` records (ids ``f0``, ``f1``, ...)."""
    out = []
    for i, f in enumerate(person.facts):
        out.append(Fact(id=f"f{i}", kind=f.kind, name=f.name, value=f.value, start_frame=f.start_frame,
                        end_frame=f.end_frame, evidence_frames=[(f.start_frame + f.end_frame - 1) // 2],
                        scope="whole" if f.name in WHOLE_SCOPE else "interval"))
    return out


def _cite(facts: list[Fact], name: str, value: str) -> Predicate | None:
    """A predicate citing the longest fact with this name and value (None when there is none)."""
    same = [f for f in facts if f.name == name and f.value == value and f.known]
    if not same:
        return None
    best = max(same, key=lambda f: (f.end_frame - f.start_frame, -f.start_frame))
    return Predicate(name=name, value=value, fact_ids=[best.id])


def _a(phrase: str) -> str:
    """``phrase`` with its indefinite article ("a red", "an orange")."""
    return with_article(phrase)


def query_templates(person: PersonTruth, facts: list[Fact], variant: int) -> list[tuple[str, list[Predicate]]]:
    """Candidate queries for one person, in the fixed order of preference.

    ``variant`` picks synonyms (top/shirt/jacket, ...) so that texts are not all alike.
    """
    u, lo = person.upper_colour, person.lower_colour
    up, low = UPPER_WORDS[variant % 3], LOWER_WORDS[(variant // 3) % 3].format(lo)
    low = _a(low) if low.endswith("skirt") else low
    who, the = SOMEONE[(variant // 9) % 3], THE_ONE[(variant // 9) % 3]
    walks = [f for f in facts if f.name == "walks"]
    direction = walks[0].value if walks else None
    pace = next((f.value for f in facts if f.name == "speed"), None)
    stands = any(f.name == "stands" for f in facts)
    scene = _scene_templates(facts, u, lo, up, low, who, the)
    out: list[tuple[str, list[Predicate | None]]] = [
        (f"{who} in {_a(u)} {up} and {low}", [_cite(facts, "upper_colour", u), _cite(facts, "lower_colour", lo)]),
    ]
    if direction:
        out.append((f"{the} in {u} walking {DIRECTION_PHRASES[direction]}",
                    [_cite(facts, "upper_colour", u), _cite(facts, "walks", direction)]))
    out += scene[:1]
    if direction and pace:
        out.append((f"{who} in {low} walking {DIRECTION_PHRASES[direction]} at a {pace} pace",
                    [_cite(facts, "lower_colour", lo), _cite(facts, "walks", direction),
                     _cite(facts, "speed", pace)]))
        out.append((f"{who} walking {DIRECTION_PHRASES[direction]} at a {pace} pace",
                    [_cite(facts, "walks", direction), _cite(facts, "speed", pace)]))
    out += scene[1:]
    if stands:
        out.append((f"{the} in {_a(u)} {up} who stops for a while",
                    [_cite(facts, "upper_colour", u), _cite(facts, "stands", "still")]))
    out.append((f"{the} in {low}", [_cite(facts, "lower_colour", lo)]))
    out.append((f"{the} wearing {u}", [_cite(facts, "upper_colour", u)]))
    return [(text, preds) for text, preds in out if all(p is not None for p in preds)]


def _scene_templates(facts: list[Fact], u: str, lo: str, up: str, low: str, who: str, the: str
                     ) -> list[tuple[str, list[Predicate | None]]]:
    """Scene-context queries of one person, most telling first: the object the person is near
    longest, rain, night, the ground the person is on longest. Each joins one scene fact to a
    clothing colour (a whole-track fact), so no two interval facts are said as one moment."""
    out: list[tuple[str, list[Predicate | None]]] = []

    def longest(name: str) -> str | None:
        same = [f for f in facts if f.name == name and f.known and f.value != NEAR_NOTHING]
        return max(same, key=lambda f: (f.end_frame - f.start_frame, -f.start_frame)).value if same else None

    near, ground = longest("near"), longest("ground")
    if near:
        out.append((f"{the} in {u} {near_phrase(near)}", [_cite(facts, "upper_colour", u), _cite(facts, "near", near)]))
    if _cite(facts, "weather", "rain"):
        out.append((f"{who} in {_a(u)} {up} {WEATHER_PHRASES['rain']}",
                    [_cite(facts, "upper_colour", u), _cite(facts, "weather", "rain")]))
    if _cite(facts, "light", "night"):
        out.append((f"{who} in {low} {LIGHT_PHRASES['night']}",
                    [_cite(facts, "lower_colour", lo), _cite(facts, "light", "night")]))
    if ground:
        out.append((f"{the} in {low} {GROUND_PHRASES[ground]}",
                    [_cite(facts, "lower_colour", lo), _cite(facts, "ground", ground)]))
    return out


# -- building ------------------------------------------------------------------------------------------
@dataclass
class _Track:
    id: int
    video_id: int
    facts: list[Fact]
    frames: np.ndarray
    boxes: np.ndarray
    person: PersonTruth


def _tracks_of(gt: GroundTruth, video_id: int, first_id: int, config: DemoBenchmarkConfig) -> list[_Track]:
    tracks = []
    for person in gt.people:
        frames = [f for f in range(gt.n_frames) if person.boxes[f] is not None and person.visible[f] >= config.min_visible]
        if len(frames) < config.min_observations:
            continue
        boxes = np.asarray([person.boxes[f] for f in frames], dtype=np.float32)
        tracks.append(_Track(first_id + len(tracks), video_id, person_facts(person),
                             np.asarray(frames, dtype=np.int32), boxes, person))
    return tracks


def _label(predicates: list[Predicate], track: _Track) -> int:
    covered = (int(track.frames[0]), int(track.frames[-1]) + 1)
    return predicates_label(predicates, track.facts, covered=covered)


def build_split(config: DemoBenchmarkConfig, split: str, root: Path, ids: dict[str, int]) -> RelationSnapshotData:
    """Render the split's scenes and build its snapshot; ``ids`` holds the next free id of each kind."""
    videos, tracks_by_video, snap_tracks = [], {}, []
    for spec in split_scenes(config, split):
        path, gt = render_cached(spec, root / "videos")
        vid = ids["video"]
        ids["video"] += 1
        videos.append(SnapshotVideo(id=vid, path=str(path.resolve()), width=gt.width, height=gt.height, fps=gt.fps,
                                    n_frames=gt.n_frames))
        tracks = _tracks_of(gt, vid, ids["track"], config)
        ids["track"] += len(tracks)
        tracks_by_video[vid] = tracks
        snap_tracks += [SnapshotTrack(t.id, vid, t.frames, t.boxes) for t in tracks]
    all_tracks = [t for ts in tracks_by_video.values() for t in ts]
    queries, relations = [], []
    binary_rows = split != "train"
    for vid, pool in tracks_by_video.items():
        for target in pool:
            kept = 0
            for text, predicates in query_templates(target.person, target.facts, variant=ids["query"]):
                if kept >= config.queries_per_person:
                    break
                labels = {t.id: _label(predicates, t) for t in pool}
                if labels[target.id] != 1 or sum(v == 1 for v in labels.values()) != 1:
                    continue                      # does not single out its person
                if binary_rows and any(v == -1 for v in labels.values()):
                    continue                      # dev/test rows must be fully binary
                if check_query(QueryProposal(text, predicates), target.facts):
                    continue
                qid = ids["query"]
                ids["query"] += 1
                kept += 1
                queries.append(SnapshotQuery(id=qid, video_id=vid, text=text,
                                             predicates=[dataclasses.asdict(p) for p in predicates],
                                             target_id=target.id))
                required = {(p.name, p.value) for p in predicates}
                for t in all_tracks:
                    if t.video_id == vid:
                        relations.append(Relation(qid, t.id, labels[t.id], "ground_truth", "within"))
                        continue
                    label = _label(predicates, t)
                    if label == -1:
                        continue
                    shares = any((f.name, f.value) in required for f in t.facts)
                    stratum = "potential_match" if label == 1 else ("hard_negative" if shares else "easy_negative")
                    relations.append(Relation(qid, t.id, label, "ground_truth", stratum))
    snapshot = RelationSnapshotData(split=split, videos=videos, tracks=snap_tracks, queries=queries,
                                    relations=relations,
                                    meta={"builder": "models.demo_benchmark", "config": config.as_dict()})
    snapshot.validate()
    return snapshot


def build_demo_benchmark(root: str | Path, config: DemoBenchmarkConfig | dict | None = None,
                         *, save: bool = True) -> dict[str, RelationSnapshotData]:
    """Render (or reuse) the videos under ``root`` and build the train, dev and test snapshots.

    With ``save`` each snapshot is also written to ``<root>/snapshots/<split>``.
    """
    cfg = config if isinstance(config, DemoBenchmarkConfig) else DemoBenchmarkConfig.from_dict(config)
    root = Path(root)
    ids = {"video": 1, "track": 1, "query": 1}
    out = {}
    for split in SPLITS:
        snap = build_split(cfg, split, root, ids)
        if save:
            snap.save(root / "snapshots" / split)
        out[split] = snap
    return out
