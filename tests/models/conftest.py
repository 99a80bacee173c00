"""Shared fixtures for the model tests: small rendered videos (rendered once per session) and the
real pedestrian video ``vtest.avi`` cut to its first frames."""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from models.world.renderer import render_scene
from models.world.scene import DistractorSpec, GroundTruth, PersonSpec, SceneSpec

VTEST = Path(__file__).resolve().parents[3] / "shared" / "data" / "vtest.avi"
VTEST_FRAMES = 150


@dataclass
class RenderedVideo:
    spec: SceneSpec
    path: Path
    gt: GroundTruth


def small_scene_spec() -> SceneSpec:
    """Four seconds at 12 fps: two people cross (one in front of the other), a third walks,
    stops for a second and a half behind them and walks on; a ball rolls by."""
    return SceneSpec(
        name="small", width=640, height=360, fps=12, n_frames=48, seed=11, background="plaza",
        people=[
            PersonSpec("red", "blue", "right", start=(90, 300), height=150, speed="normal"),
            PersonSpec("yellow", "black", "left", start=(560, 335), height=165, speed="normal", skin=2),
            PersonSpec("white", "green", "right", start=(250, 255), height=125, speed="slow",
                       stops=[(12, 30)], skin=1, hair=2),
        ],
        distractors=[DistractorSpec("ball", "orange", start=(20, 352), velocity=(50, 0), size=26)],
    )


@pytest.fixture(scope="session")
def rendered_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("rendered")


@pytest.fixture(scope="session", name="small_scene_spec")
def small_scene_spec_fixture() -> SceneSpec:
    return small_scene_spec()


@pytest.fixture(scope="session")
def rendered_small(rendered_dir) -> RenderedVideo:
    spec = small_scene_spec()
    path = rendered_dir / f"{spec.name}.mp4"
    gt = render_scene(spec, path)
    return RenderedVideo(spec, path, gt)


class HeadFrames:
    """A FrameSource showing only the first ``n`` frames of another one."""

    def __init__(self, source, n: int):
        self.source = source
        self.frame_count = min(int(n), int(source.frame_count))
        self.fps = source.fps
        self.width = source.width
        self.height = source.height

    def read(self, index: int) -> np.ndarray:
        if not 0 <= index < self.frame_count:
            raise IndexError(f"frame {index} is outside 0..{self.frame_count - 1}")
        return self.source.read(index)

    def iter_frames(self, start: int = 0, stop: int | None = None, step: int = 1) -> Iterator[tuple[int, np.ndarray]]:
        stop = self.frame_count if stop is None else min(stop, self.frame_count)
        return self.source.iter_frames(start, stop, step)


@pytest.fixture(scope="session")
def vtest_head():
    """The first VTEST_FRAMES frames of the real pedestrian video (skipped where it is absent)."""
    if not VTEST.is_file():
        pytest.skip(f"{VTEST} is not there (see shared/data/README.md for how to get it)")
    from models.media.video import FrameReader

    reader = FrameReader(VTEST)
    yield HeadFrames(reader, VTEST_FRAMES)
    reader.close()
