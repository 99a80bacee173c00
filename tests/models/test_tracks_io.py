"""Parsing MOTChallenge, JSON tube and CSV track files, and refusing bad ones with line numbers."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from models.tracks_io import TracksFormatError, check_against_video, parse_tracks
from models.tracks_io.mot import find_sequence, format_mot, format_seqinfo, parse_seqinfo
from models.tracks_io.tubes_json import format_tubes_json

EXAMPLE = Path(__file__).resolve().parents[2] / "docs" / "examples" / "tubes_hcstvg_style.json"


def refused(fmt, text, line, fragment, **kw):
    with pytest.raises(TracksFormatError) as info:
        parse_tracks(fmt, text, **kw)
    assert info.value.first_line == line, info.value.problems
    assert fragment in str(info.value)
    return info.value


def test_mot_ground_truth_is_1_based_and_skips_rows_not_considered():
    text = ("1,1,11,21,40,80,1,1,0.9\n"
            "2,1,13,21,40,80,1,1,1\n"
            "1,2,300,100,20,30,0,8,1\n"        # a distractor, not considered
            "1,3,100,100,20,30,1,7,1\n")       # a static person
    parsed = parse_tracks("mot", text, gt=True)
    assert [t.track_id for t in parsed.tracks] == [1, 3]
    t = parsed.tracks[0]
    np.testing.assert_array_equal(t.frames, [0, 1])
    np.testing.assert_allclose(t.boxes, [[10, 20, 50, 100], [12, 20, 52, 100]])
    assert parsed.tracks[1].category == "static_person"
    assert parsed.skipped == {"not_considered": 1} and parsed.n_rows == 3


def test_mot_tracker_output_keeps_scores():
    parsed = parse_tracks("mot", "3,7,1,1,10,10,0.75,-1,-1,-1\n1,7,1,1,10,10,0.5,-1,-1,-1\n")
    (t,) = parsed.tracks
    np.testing.assert_array_equal(t.frames, [0, 2])                 # sorted by frame
    np.testing.assert_allclose(t.scores, [0.5, 0.75])
    np.testing.assert_array_equal(t.lines, [2, 1])


@pytest.mark.parametrize("text,line,fragment", [
    ("1,1,1,1,10,10,1,1,1\n1,1,1,1,10,10\n", 2, "found 6"),                  # wrong columns
    ("1,1,1,1,10,10,1,1,1\n\n2,1,nan,1,10,10,1,1,1\n", 3, "not a finite number"),
    ("1,1,1,1,10,10,1,1,1\n1,1,5,5,10,10,1,1,1\n", 2, "appears twice on frame 0"),
    ("0,1,1,1,10,10,1,1,1\n", 1, "start at 1"),
    ("1,1,1,1,0,10,1,1,1\n", 1, "empty or inverted"),
    ("1,1,1,1,10,10,1,99,1\n", 1, "unknown class"),
    ("1,x,1,1,10,10,1,1,1\n", 1, "id is not a number"),
])
def test_bad_mot_lines_are_refused_with_their_line(text, line, fragment):
    refused("mot", text, line, fragment, gt=True)


def test_checks_against_the_video_name_the_line():
    parsed = parse_tracks("mot", "1,1,1,1,10,10,1,1,1\n5,1,1,1,10,10,1,1,1\n", gt=True)
    with pytest.raises(TracksFormatError) as info:
        check_against_video(parsed, width=100, height=100, frame_count=4)
    assert info.value.first_line == 2 and "frame 5 is past the video's last frame 4 (4 frames, numbered from 1" in str(info.value)
    parsed = parse_tracks("mot", "1,1,1,1,10,10,1,1,1\n2,1,95,1,10,10,1,1,1\n3,1,200,1,10,10,1,1,1\n", gt=True)
    with pytest.raises(TracksFormatError) as info:
        check_against_video(parsed, width=100, height=100, frame_count=4)
    assert [line for line, _ in info.value.problems] == [2, 3]
    # with clipping, the box partly outside is clipped and the one wholly outside still refused
    with pytest.raises(TracksFormatError) as info:
        check_against_video(parsed, width=100, height=100, frame_count=4, clip=True)
    assert [line for line, _ in info.value.problems] == [3] and "wholly outside" in str(info.value)
    parsed = parse_tracks("mot", "1,1,1,1,10,10,1,1,1\n2,1,95,1,10,10,1,1,1\n", gt=True)
    assert check_against_video(parsed, width=100, height=100, frame_count=4, clip=True) == {"clipped": 1}
    np.testing.assert_allclose(parsed.tracks[0].boxes[1], [94, 0, 100, 10])


def test_seqinfo_and_folder_layout(tmp_path):
    info = parse_seqinfo(format_seqinfo(name="s", fps=12, frame_count=30, width=320, height=180))
    assert info == {"name": "s", "imDir": "img1", "frameRate": 12.0, "seqLength": 30, "imWidth": 320,
                    "imHeight": 180, "imExt": ".jpg"}
    with pytest.raises(TracksFormatError, match="missing seqLength"):
        parse_seqinfo("[Sequence]\nframeRate=10\nimWidth=3\nimHeight=3\n")
    (tmp_path / "gt").mkdir()
    (tmp_path / "gt" / "gt.txt").write_text("1,1,1,1,10,10,1,1,1\n")
    (tmp_path / "seqinfo.ini").write_text(format_seqinfo(name="s", fps=12, frame_count=30, width=320, height=180))
    seq = find_sequence(tmp_path)
    assert seq.gt and seq.tracks_path.name == "gt.txt" and seq.seqinfo["seqLength"] == 30 and seq.frames_dir is None
    assert find_sequence(tmp_path / "gt" / "gt.txt").seqinfo == seq.seqinfo


def test_mot_round_trip():
    parsed = parse_tracks("mot", "1,1,11,21,40,80,1,1,1\n2,1,13.5,21,40,80,1,1,1\n1,4,100,100,20,30,1,1,1\n", gt=True)
    again = parse_tracks("mot", format_mot(parsed.tracks), gt=True)
    for a, b in zip(parsed.tracks, again.tracks):
        np.testing.assert_allclose(a.boxes, b.boxes)
        np.testing.assert_array_equal(a.frames, b.frames)


def test_json_tubes_with_captions_and_line_numbers():
    text = ('{"format": "trajlab-tubes/1", "box_format": "xywh", "frame_base": 1,\n'
            ' "video": {"width": 100, "height": 80, "frame_count": 10},\n'
            ' "tubes": [\n'
            '  {"id": 4, "caption": "The woman in red walks left.", "boxes": [\n'
            '    [1, 10, 10, 20, 30],\n'
            '    [2, 12, 10, 20, 30]]}]}\n')
    parsed = parse_tracks("json", text)
    (t,) = parsed.tracks
    assert t.caption == "The woman in red walks left." and t.category == "person"
    np.testing.assert_array_equal(t.frames, [0, 1])
    np.testing.assert_allclose(t.boxes[0], [10, 10, 30, 40])
    np.testing.assert_array_equal(t.lines, [5, 6])
    with pytest.raises(TracksFormatError) as info:
        check_against_video(parsed, width=120, height=80, frame_count=10)
    assert info.value.first_line == 2
    again = parse_tracks("json", format_tubes_json(parsed.tracks))
    np.testing.assert_allclose(again.tracks[0].boxes, t.boxes)
    assert again.tracks[0].caption == t.caption


@pytest.mark.parametrize("text,line,fragment", [
    ('{"format": "trajlab-tubes/1", "tubes": [\n {"id": 1, "boxes": [\n [0, 1, 1, 5, 5],\n [0, 2, 2, 6, 6]]}]}',
     4, "appears twice on frame 0"),
    ('{"format": "trajlab-tubes/1", "tubes": [\n {"id": 1, "boxes": [\n [0, 1, 1, 5],\n [1, 2, 2, 6, 6]]}]}',
     3, "a box must be"),
    ('{"format": "trajlab-tubes/1", "tubes": [\n {"id": 1, "boxes": [\n [0, 1, 1, 5, 5],\n [1, NaN, 2, 6, 6]]}]}',
     4, "not a finite number"),
    ('{"format": "trajlab-tubes/1", "tubes": [\n {"id": 1, "boxes": [[0, 1, 1, 5, 5]]},\n'
     ' {"id": 1, "boxes": [[0, 1, 1, 5, 5]]}]}', 3, "used twice"),
    ('{"format": "trajlab-tubes/1",\n "tubes": [\n {"id": 1, "boxes": [[0, 1, 1, 5, 5]],\n "colour": "red"}]}',
     3, "unknown key 'colour'"),
    ('{"format": "trajlab-tubes/1",\n "tubes": [\n {"id": 1, "boxes": [[0, 1, 1, 5, 5]]\n ]}', 4, "not valid JSON"),
    ('{"format": "tubes", "tubes": [{"id": 1, "boxes": [[0, 1, 1, 5, 5]]}]}', 1, "'format' must be"),
])
def test_bad_json_tubes_are_refused_with_their_line(text, line, fragment):
    refused("json", text, line, fragment)


def test_the_documented_example_parses():
    parsed = parse_tracks("json", EXAMPLE.read_text())
    assert parsed.tracks and all(t.caption for t in parsed.tracks)


def test_csv_tracks():
    text = "frame,track_id,x1,y1,x2,y2,category\n0,2,1,1,5,5,car\n1,2,2,1,6,5,car\n0,3,10,10,20,20,person\n"
    parsed = parse_tracks("csv", text)
    assert [(t.track_id, t.category, t.n_obs) for t in parsed.tracks] == [(2, "car", 2), (3, "person", 1)]
    refused("csv", "track_id,frame,x1,y1,x2\n", 1, "missing column(s) ['y2']")
    refused("csv", "track_id,frame,x1,y1,x2,y2\n1,0,1,1,5,5\n1,1,1,1,5\n", 3, "found 5")
    refused("csv", "track_id,frame,x1,y1,x2,y2\n1,0,1,1,5,5\n1,1,1,1,5,inf\n", 3, "not a finite number")
    refused("csv", "track_id,frame,x1,y1,x2,y2\n1,0,1,1,5,5\n1,0,1,1,5,6\n", 3, "appears twice on frame 0")
    refused("csv", "track_id,frame,x1,y1,x2,y2\n", 0, "no tracks")
    parsed = parse_tracks("csv", "track_id,frame,x1,y1,x2,y2\n1,1,1,1,5,5\n", frame_base=1)
    assert parsed.tracks[0].frames.tolist() == [0]
