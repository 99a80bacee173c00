"""CVAT for video 1.1 XML and Label Studio video JSON: the documented examples give the tracks each
tool shows (interpolation, outside, occlusion, enabled, rotation), random keyframe tracks agree
with a per-frame reading of each tool's rule, and bad files are refused with their lines."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from models.tracks_io import TooManyBoxes, TracksFormatError, parse_tracks

EXAMPLES = Path(__file__).resolve().parents[2] / "docs" / "examples"
VIDEO = {"width": 640, "height": 360, "frame_count": 50}
BOX = 'keyframe="1" outside="0" occluded="0"'


def cvat(tracks: str, *, meta: str = "<meta><task><size>50</size><stop_frame>49</stop_frame></task></meta>") -> str:
    return f'<?xml version="1.0" encoding="utf-8"?>\n<annotations>\n<version>1.1</version>\n{meta}\n{tracks}\n</annotations>\n'


def ls(sequence: list[dict], *, frames_count: int | None = 50, labels=("person",)) -> str:
    value = {"sequence": sequence, "labels": list(labels)}
    if frames_count is not None:
        value["framesCount"] = frames_count
    task = {"id": 1, "data": {"video": "v.mp4"},
            "annotations": [{"id": 1, "result": [{"id": "r1", "type": "videorectangle", "value": value}]}]}
    return json.dumps([task], indent=1)


def entry(frame, x, *, enabled=True, y=20.0, w=5.0, h=25.0, **extra) -> dict:
    return {"frame": frame, "enabled": enabled, "x": x, "y": y, "width": w, "height": h, **extra}


def refused(fmt, text, line, fragment, video=VIDEO):
    with pytest.raises(TracksFormatError) as info:
        parse_tracks(fmt, text, video=video)
    assert info.value.first_line == line, info.value.problems
    assert fragment in str(info.value), str(info.value)
    return info.value


# -- the documented examples ---------------------------------------------------------------------
def test_the_cvat_example_reads_as_cvat_shows_it():
    parsed = parse_tracks("cvat", (EXAMPLES / "cvat_for_video_1_1.xml").read_text(), video=VIDEO)
    person, car = parsed.tracks
    assert (person.track_id, person.category, car.track_id, car.category) == (0, "person", 1, "car")
    # visible 0..19 (outside from 20), again 30..39 (outside from 40)
    np.testing.assert_array_equal(person.frames, [*range(0, 20), *range(30, 40)])
    np.testing.assert_allclose(person.boxes[3], [130, 50, 170, 150])          # between frames 0 and 5
    np.testing.assert_allclose(person.boxes[5], [150, 50, 190, 150])          # the listed keyframe="0" box
    np.testing.assert_allclose(person.boxes[15], [200, 50, 240, 150])         # towards the outside box: no move
    np.testing.assert_allclose(person.boxes[person.frames.tolist().index(34)], [340, 60, 380, 160])
    # the car: interpolated to frame 45, then held to the task's stop_frame 49
    np.testing.assert_array_equal(car.frames, np.arange(50))
    np.testing.assert_allclose(car.boxes[[0, 9, 45, 49]], [[400, 200, 500, 260], [409, 200, 509, 260],
                                                            [445, 200, 545, 260], [445, 200, 545, 260]])
    assert parsed.skipped == {"outside": 2, "tracks_not_boxes": 1}
    assert parsed.noted == {"interpolated": 73, "occluded": 10, "keyframes": 8}   # frames 10..19 occluded
    assert parsed.declared_video == {"width": 640, "height": 360} and parsed.n_rows == 80


def test_the_label_studio_example_reads_as_label_studio_shows_it():
    parsed = parse_tracks("labelstudio", (EXAMPLES / "label_studio_video.json").read_text(), video=VIDEO)
    person, car = parsed.tracks
    assert (person.track_id, person.category, car.track_id, car.category) == (1, "person", 2, "car")
    # frames 1..11 (1-based) interpolated, 11 disabled: hidden until 21, which is held to framesCount 50
    np.testing.assert_array_equal(person.frames, [*range(0, 11), *range(20, 50)])
    np.testing.assert_allclose(person.boxes[0], [64, 72, 96, 162])            # 10% of 640, 20% of 360, ...
    np.testing.assert_allclose(person.boxes[5], [96, 72, 128, 162])           # halfway from 10% to 20%
    np.testing.assert_allclose(person.boxes[-1], [192, 72, 224, 162])
    # rotated 90 degrees clockwise about its top-left corner (320, 180): 64 x 36 px becomes 36 x 64
    np.testing.assert_array_equal(car.frames, [4])
    np.testing.assert_allclose(car.boxes, [[284, 180, 320, 244]], atol=1e-9)
    assert parsed.skipped == {"other_results": 1}                     # the choices; the cancelled one unread
    assert parsed.noted == {"interpolated": 38, "keyframes": 4, "rotated": 1} and parsed.frame_base == 1


# -- each tool's rule, frame by frame ------------------------------------------------------------
def _cvat_reference(shapes: list[tuple[int, float, bool]], end: int) -> dict[int, float]:
    """Where CVAT shows a track whose listed shapes are ``(frame, x, outside)``, frame by frame:
    the last listed shape at or before the frame decides."""
    shapes = sorted(shapes)
    shown = {}
    for f in range(end + 1):
        before = [s for s in shapes if s[0] <= f]
        if not before or before[-1][2]:
            continue
        frame, x, _ = before[-1]
        after = [s for s in shapes if s[0] > f]
        if frame == f or not after:
            shown[f] = x
        else:
            nf, nx, _ = after[0]
            shown[f] = x + (nx - x) * (f - frame) / (nf - frame)
    return shown


def _ls_reference(entries: list[tuple[int, float, bool]], frames_count: int) -> dict[int, float]:
    """Where Label Studio shows a region whose entries are ``(frame, x, enabled)``, 1-based frames:
    an entry is shown on its frame, an enabled one carries on to the next entry or to the end."""
    entries = sorted(entries)
    shown = {}
    for f in range(1, frames_count + 1):
        before = [e for e in entries if e[0] <= f]
        if not before:
            continue
        frame, x, enabled = before[-1]
        after = [e for e in entries if e[0] > f]
        if frame == f:
            shown[f] = x
        elif enabled:
            shown[f] = x if not after else x + (after[0][1] - x) * (f - frame) / (after[0][0] - frame)
    return shown


frames_strategy = st.lists(st.integers(0, 49), min_size=1, max_size=8, unique=True)


@settings(max_examples=60, deadline=None)
@given(frames=frames_strategy, data=st.data())
def test_cvat_tracks_match_a_frame_by_frame_reading(frames, data):
    shapes = [(f, float(data.draw(st.integers(0, 500))), data.draw(st.booleans())) for f in frames]
    boxes = "\n".join(f'<box frame="{f}" keyframe="1" outside="{int(o)}" occluded="0" xtl="{x}" ytl="10" '
                      f'xbr="{x + 20}" ybr="50"/>' for f, x, o in shapes)
    expected = _cvat_reference(shapes, end=49)
    try:
        parsed = parse_tracks("cvat", cvat(f'<track id="4" label="person">\n{boxes}\n</track>'), video=VIDEO)
    except TracksFormatError as exc:
        assert not expected and "no box track" in str(exc)
        return
    (track,) = parsed.tracks
    assert track.frames.tolist() == sorted(expected)
    np.testing.assert_allclose(track.boxes[:, 0], [expected[f] for f in sorted(expected)])
    np.testing.assert_allclose(track.boxes[:, 2] - track.boxes[:, 0], 20)


@settings(max_examples=60, deadline=None)
@given(frames=st.lists(st.integers(1, 50), min_size=1, max_size=8, unique=True), data=st.data())
def test_label_studio_regions_match_a_frame_by_frame_reading(frames, data):
    entries = [(f, float(data.draw(st.integers(0, 90))), data.draw(st.booleans())) for f in frames]
    parsed = parse_tracks("labelstudio", ls([entry(f, x, enabled=e) for f, x, e in entries]), video=VIDEO)
    expected = _ls_reference(entries, 50)
    (track,) = parsed.tracks
    assert (track.frames + 1).tolist() == sorted(expected)
    np.testing.assert_allclose(track.boxes[:, 0], [expected[f] * 6.4 for f in sorted(expected)])


def test_cvat_frame_filter_steps_and_rotation():
    meta = "<meta><task><size>10</size><start_frame>0</start_frame><frame_filter>step=5</frame_filter></task></meta>"
    text = cvat(f'<track id="1" label="car"><box frame="0" {BOX} xtl="0" ytl="0" xbr="10" ybr="10"/>'
                f'<box frame="20" {BOX} xtl="40" ytl="0" xbr="50" ybr="10"/></track>'
                f'<track id="2" label="car"><box frame="5" {BOX} xtl="100" ytl="100" xbr="140" ybr="120" '
                'rotation="90"/></track>', meta=meta)
    a, b = parse_tracks("cvat", text, video=VIDEO).tracks
    np.testing.assert_array_equal(a.frames, [0, 5, 10, 15, 20, 25, 30, 35, 40, 45])   # the task's grid, to 45
    np.testing.assert_allclose(a.boxes[1], [10, 0, 20, 10])
    np.testing.assert_array_equal(b.frames, np.arange(5, 50, 5))                      # held to the task's end
    np.testing.assert_allclose(b.boxes[0], [110, 90, 130, 130])                        # turned about its centre


def test_cvat_rotation_turns_the_short_way_round():
    wide = 'xtl="100" ytl="100" xbr="140" ybr="120"'                          # 40 x 20 about (120, 110)
    text = cvat(f'<track id="1" label="car"><box frame="0" {BOX} {wide} rotation="350"/>'
                f'<box frame="4" {BOX} {wide} rotation="30"/>'
                f'<box frame="5" keyframe="1" outside="1" occluded="0" {wide}/></track>')
    (track,) = parse_tracks("cvat", text, video=VIDEO).tracks
    np.testing.assert_array_equal(track.frames, [0, 1, 2, 3, 4])
    np.testing.assert_allclose(track.boxes[1], [100, 100, 140, 120], atol=1e-9)       # 0 degrees (the long way: 270)
    c, s = np.cos(np.deg2rad(10)), np.sin(np.deg2rad(10))
    np.testing.assert_allclose(track.boxes[0], [120 - 20 * c - 10 * s, 110 - 20 * s - 10 * c,
                                                120 + 20 * c + 10 * s, 110 + 20 * s + 10 * c])


def test_too_many_boxes_once_expanded_is_refused_before_any_array():
    text = cvat(f'<track id="1" label="car"><box frame="0" {BOX} xtl="0" ytl="0" xbr="10" ybr="10"/>'
                f'<box frame="2000000000" {BOX} xtl="40" ytl="0" xbr="50" ybr="10"/></track>')
    with pytest.raises(TooManyBoxes) as info:
        parse_tracks("cvat", text, video=None, max_boxes=1000)
    assert info.value.limit == 1000 and info.value.count > 1000


# -- bad files ----------------------------------------------------------------------------------
GOOD_BOX = f'<box frame="0" {BOX} xtl="1" ytl="2" xbr="30" ybr="40"/>'


@pytest.mark.parametrize("text,line,fragment", [
    (cvat(f'<track id="1" label="person">\n{GOOD_BOX}\n<box frame="1"'), 8, "not well-formed XML"),
    (cvat(f'<track id="1" label="person">\n{GOOD_BOX}\n</track>').replace("1.1", "1.0"), 3, "expected <version>1.1"),
    ('<annotations><version>1.1</version>\n<image id="0" name="a.jpg"/></annotations>', 2, "CVAT for images"),
    (cvat(f'<track id="1" label="person">\n{GOOD_BOX}\n<box frame="1" {BOX} xtl="nan" ytl="2" xbr="30" ybr="40"/>'
          "\n</track>"), 7, "xtl is not a finite number"),
    (cvat(f'<track id="1" label="person">\n{GOOD_BOX}\n<box frame="1" keyframe="1" outside="0" xtl="1" ytl="2" '
          'xbr="30" ybr="40"/>\n</track>'), 7, "lacks the attribute(s) occluded"),
    (cvat(f'<track id="1" label="person">\n{GOOD_BOX}\n<box frame="60" {BOX} xtl="1" ytl="2" xbr="30" ybr="40"/>'
          "\n</track>"), 7, "frame 60 is past the video's last frame 49"),
    (cvat(f'<track id="1" label="person">\n{GOOD_BOX}\n<box frame="0" {BOX} xtl="1" ytl="2" xbr="30" ybr="40"/>'
          "\n</track>"), 7, "states frame 0 twice (first on line 6)"),
    (cvat(f'<track id="1" label="person">\n{GOOD_BOX}\n<box frame="3" {BOX} xtl="9" ytl="2" xbr="3" ybr="40"/>'
          "\n</track>"), 7, "empty or inverted"),
    (cvat(f'<track id="1">\n{GOOD_BOX}\n</track>'), 5, "track 1 has no 'label'"),
    (cvat(f'<track id="1" label="p">\n{GOOD_BOX}\n</track>\n<track id="1" label="p">\n{GOOD_BOX}\n</track>'), 8,
     "track 1 is listed twice"),
    (cvat(f'<track id="1" label="p">\n<box frame="0" {BOX} xtl="1" ytl="2" xbr="30" ybr="40" outside="2"/>\n</track>'),
     6, "not well-formed XML: duplicate attribute"),
    ('<?xml version="1.0"?>\n<!DOCTYPE a [<!ENTITY x "xx">]>\n<annotations/>', 2, "document type declaration"),
])
def test_bad_cvat_files_are_refused_with_the_line_of_the_element(text, line, fragment):
    refused("cvat", text, line, fragment)


@pytest.mark.parametrize("sequence,line,fragment", [
    ([entry(1, 10), entry(2, float("nan"))], 24, "x is not a finite number"),
    ([entry(1, 10), {"frame": 2, "x": 10, "y": 20, "width": 5, "height": 25}], 24, "lacks enabled"),
    ([entry(1, 10), entry(51, 10)], 24, "frame 51 is past the video's last frame 50"),
    ([entry(1, 10), entry(0, 10)], 24, "frame numbers start at 1"),
    ([entry(1, 10), entry(2, 10, enabled="yes")], 24, "'enabled' must be true or false"),
    ([entry(1, 10), entry(2, 10, w=0)], 24, "the box on frame 2 is empty"),
    ([entry(1, 10), entry(1, 12)], 24, "states frame 1 twice (first on line 16)"),
])
def test_bad_label_studio_regions_are_refused_with_the_line_of_the_entry(sequence, line, fragment):
    refused("labelstudio", ls(sequence), line, fragment)


def test_bad_label_studio_files_are_refused_with_their_line():
    refused("labelstudio", '[{"id": 1,\n "annotations": [}]', 2, "not valid JSON")
    refused("labelstudio", '[{"id": 1, "annotations": []}]', 1, "no annotation in the file holds video rectangles")
    two = json.loads(ls([entry(1, 10)]))
    two[0]["annotations"].append(dict(two[0]["annotations"][0], id=2))
    error = refused("labelstudio", json.dumps(two, indent=1), 33, "2 annotations hold video rectangles")
    assert "task 1 annotation 1 (line 8)" in str(error)
    refused("labelstudio", ls([entry(1, 10)], labels=("a", "b")), 14, "has 2 labels")
    for odd_id in ([1], {}, 1.5):
        odd = json.loads(ls([entry(1, 10)]))
        odd[0]["annotations"][0]["result"][0]["id"] = odd_id
        refused("labelstudio", json.dumps(odd, indent=1), 11, "a region's 'id' must be a text or a number")
    with pytest.raises(TracksFormatError, match="whose size turns them into pixels"):
        parse_tracks("labelstudio", ls([entry(1, 10)]))


def test_boxes_outside_the_frame_are_refused_by_the_video_check_with_their_line():
    from models.tracks_io import check_against_video

    parsed = parse_tracks("labelstudio", ls([entry(1, 10), entry(3, 98)]), video=VIDEO)
    with pytest.raises(TracksFormatError) as info:
        check_against_video(parsed, width=640, height=360, frame_count=50)
    assert info.value.first_line == 24 and "lies outside the 640x360 frame" in str(info.value)
