"""The describer and the pixel scorer look at pixels and boxes: they neither import the synthetic
world's numeric tables (the renderer's palette, paces and foreshortening) nor share a number with
them, and on a clip already rendered their outputs stay the same when those tables change."""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from models.backends.vlm import DescribeRequest, ScoreRequest
from models.backends.vlm.heuristic import HeuristicDescriber
from models.backends.vlm.heuristic_scorer import HeuristicPixelScorer
from models.body_norms import (
    ANKLE,
    HIP,
    LOWER_GARMENT_ROWS,
    SHOULDER,
    UPPER_GARMENT_ROWS,
    rows_below_top,
)
from models.demo.describe_eval import truth_track
from models.pace_norms import TYPICAL_PACE_M_S, heights_per_s
from models.world import figures, renderer, scene
from models.world import palette as world
from models.world.renderer import render_scene
from models.world.scene import PersonSpec, SceneSpec

REPO = Path(__file__).resolve().parents[2]
# Model-side code: everything under models/ but the world and its harnesses; none of it may read
# the world's tables.
MODEL_SIDE = [str(p.relative_to(REPO)) for p in sorted((REPO / "models").iterdir())
              if (p.suffix == ".py" or (p / "__init__.py").exists()) and p.name not in ("world", "demo")]
DESCRIBER_MODULES = ["models.backends.vlm.heuristic", "models.backends.vlm.heuristic_scorer",
                     "models.backends.vlm.chat", "models.backends.vlm.scene_reading"]
# The world and the harnesses that score models against it.
WORLD_SIDE = ("models.world", "models.demo")
QUERIES = ["a person in a red top walking to the right", "someone in blue trousers walking slowly",
           "a person in a white shirt walking fast towards the camera", "a person standing still on the grass"]


def _model_side_files() -> list[Path]:
    out = []
    for entry in MODEL_SIDE:
        path = REPO / entry
        out += sorted(path.rglob("*.py")) if path.is_dir() else [path]
    return out


def _imported_modules(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names |= {f"{node.module}.{a.name}" for a in node.names}
    return names


def test_model_side_code_imports_nothing_of_the_world():
    offenders = {str(p.relative_to(REPO)): sorted(m for m in _imported_modules(p) if m.startswith(WORLD_SIDE))
                 for p in _model_side_files()}
    assert {k: v for k, v in offenders.items() if v} == {}


def test_the_describers_do_not_load_the_world_tables():
    code = ("import sys\n" + "".join(f"import {m}\n" for m in DESCRIBER_MODULES)
            + "print(sorted(m for m in sys.modules if m.startswith(('models.world', 'models.demo'))))")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def _world_numbers() -> set[float]:
    numbers = {float(v) for v in world.SPEED_HEIGHTS_PER_S.values()} | {float(world.DEPTH_FORESHORTENING)}
    return numbers | {float(v) for bgr in world.COLOURS.values() for v in bgr if v not in (0, 255)}


def test_no_model_side_module_shares_a_number_with_the_world_tables():
    # the palette's BGR triples nowhere on the model side; the paces and the foreshortening not in
    # the modules that say how fast people walk or what colour they wear
    paces = {float(v) for v in world.SPEED_HEIGHTS_PER_S.values()} | {float(world.DEPTH_FORESHORTENING)}
    triples = {tuple(v) for v in world.COLOURS.values()}
    found = {}
    for path in _model_side_files():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Tuple) and all(isinstance(e, ast.Constant) for e in node.elts):
                if tuple(e.value for e in node.elts) in triples:
                    found.setdefault(path.name, []).append(tuple(e.value for e in node.elts))
    for path in (REPO / "models/colour_naming.py", REPO / "models/pace_norms.py", REPO / "models/body_norms.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, float) and node.value in paces:
                found.setdefault(path.name, []).append(node.value)
    assert found == {}
    # and the paces the describer and the scorer use are not the world's
    describer, scorer = HeuristicDescriber().config, HeuristicPixelScorer().config
    used = {describer.slow_below, describer.fast_from, describer.stand_speed, scorer.stand_speed,
            *(heights_per_s(v) for v in TYPICAL_PACE_M_S.values())}
    assert used.isdisjoint(_world_numbers())


def _world_tables() -> dict[tuple, str]:
    """Every numeric table the world draws with (a module constant of models.world that is, or
    holds, a tuple of two or more numbers not all 0 or 1: colours, sizes, rows), by value."""
    found = {}
    for module in (world, figures, scene, renderer):
        for name, value in vars(module).items():
            if not name.lstrip("_").isupper():
                continue
            values = value.values() if isinstance(value, dict) else value if isinstance(value, list) else [value]
            for v in values:
                if (isinstance(v, tuple) and len(v) >= 2 and all(isinstance(e, int | float) for e in v)
                        and not set(v) <= {0, 1}):
                    found[tuple(float(e) for e in v)] = f"{module.__name__}.{name}"
    return found


def test_no_model_side_module_holds_a_table_of_the_world():
    tables = _world_tables()
    assert len(tables) > 20                                 # palette, skin and hair tones, object sizes ...
    found = []
    for path in _model_side_files():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Tuple | ast.List) and node.elts and all(
                    isinstance(e, ast.Constant) and isinstance(e.value, int | float) for e in node.elts):
                key = tuple(float(e.value) for e in node.elts)
                if key in tables:
                    found.append(f"{path.relative_to(REPO)}:{node.lineno} {key} is {tables[key]}")
    assert found == []


@pytest.fixture(scope="module")
def clip(tmp_path_factory):
    spec = SceneSpec(name="fixed", width=320, height=180, fps=12, n_frames=48, seed=11, background="park",
                     people=[PersonSpec("red", "blue", "right", start=(40, 160), height=90, speed="normal"),
                             PersonSpec("white", "black", "towards", start=(230, 110), height=60, speed="fast"),
                             PersonSpec("yellow", "grey", "none", start=(150, 150), height=80)])
    path = tmp_path_factory.mktemp("world") / "fixed.mp4"
    gt = render_scene(spec, path)
    return path, [truth_track(p) for p in gt.people]


def _outputs(path: Path, tracks) -> list:
    describer, scorer = HeuristicDescriber(), HeuristicPixelScorer()
    out = []
    for frames, boxes in tracks:
        d = describer.describe(DescribeRequest(str(path), frames, boxes))
        out.append((d.prompt_sha256, [(f.name, f.value, f.known, f.start_frame, f.end_frame) for f in d.description.facts]))
        for q in QUERIES:
            r = scorer.score(ScoreRequest(q, str(path), frames, boxes))
            out.append((r.prompt_sha256, round(r.log_p_yes, 9), r.details["cues"]))
    return out


def test_outputs_on_a_rendered_clip_do_not_depend_on_the_world_tables(clip, monkeypatch):
    path, tracks = clip
    before = _outputs(path, tracks)
    rng = np.random.default_rng(0)
    for name in list(world.COLOURS):
        monkeypatch.setitem(world.COLOURS, name, tuple(int(v) for v in rng.integers(0, 256, 3)))
    for name in list(world.SPEED_HEIGHTS_PER_S):
        monkeypatch.setitem(world.SPEED_HEIGHTS_PER_S, name, world.SPEED_HEIGHTS_PER_S[name] * 2.7)
    monkeypatch.setattr(world, "DEPTH_FORESHORTENING", 0.85)
    after = _outputs(path, tracks)
    assert after == before
    assert any(facts for _, facts in before[::len(QUERIES) + 1])     # the clip was described at all


def test_the_garment_rows_lie_inside_the_published_body_segments():
    # the rows the describer and the scorer read clothing from sit inside the torso and the legs of
    # Drillis and Contini's proportions (models.body_norms), whatever the world draws
    torso = (rows_below_top(SHOULDER), rows_below_top(HIP))
    legs = (rows_below_top(HIP), rows_below_top(ANKLE))
    for config in (HeuristicDescriber().config, HeuristicPixelScorer().config):
        assert torso[0] <= config.upper_rows[0] < config.upper_rows[1] <= torso[1]
        assert legs[0] <= config.lower_rows[0] < config.lower_rows[1] <= legs[1]
    assert (UPPER_GARMENT_ROWS, LOWER_GARMENT_ROWS) == ((0.22, 0.46), (0.60, 0.80))
