"""Malformed track files through the API (issue 27, findings 3 and 4): every one is a 400 that names
its line and field, nothing is stored, and the list of imports still answers."""
from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from tests.trajectories.factories import video_factory
from trajectories.models import ProposalConfig, ProposalRun, TrackImport, Trajectory

HUGE = "9" * 5000                                   # past Python's 4,300-digit integer conversion limit
BEYOND_FLOAT = "9" * 400                            # an integer no float holds
GT = "1,1,10,20,40,80,1,1,1\n"                      # one good MOTChallenge ground-truth row
CSV_HEAD = "track_id,frame,x1,y1,x2,y2,category\n"
CSV_ROW = "1,0,10,20,50,100,person\n"


def _tubes(tube: str) -> str:
    return '{"format": "trajlab-tubes/1",\n "tubes": [\n' + tube + "\n]}\n"


def _tube(**fields) -> str:
    body = {"id": "1", "category": '"person"', "caption": '""', "boxes": "[[0, 10, 20, 50, 100]]", **fields}
    return "{" + ", ".join(f'"{k}": {v}' for k, v in body.items()) + "}"


SEQINFO = "[Sequence]\nname=s\nimDir=img1\nframeRate=10\nseqLength=50\nimWidth=640\nimHeight=360\nimExt=.jpg\n"

# (id, format, file bytes, seqinfo bytes or None, line, words the message must hold)
VARIANTS = [
    ("mot-huge-int", "mot", f"1,{HUGE},10,20,40,80,1,1,1\n", None, 1, ["id"]),
    ("mot-nul-byte", "mot", "1,1\x00,10,20,40,80,1,1,1\n", None, 1, ["id"]),
    ("mot-nan-box", "mot", GT + "2,1,nan,20,40,80,1,1,1\n", None, 2, ["bb_left", "finite"]),
    ("mot-inf-width", "mot", GT + "2,1,10,20,inf,80,1,1,1\n", None, 2, ["bb_width", "finite"]),
    ("mot-negative-width", "mot", GT + "2,1,10,20,-40,80,1,1,1\n", None, 2, ["empty or inverted"]),
    ("mot-track-id-2^31", "mot", f"1,{2**31},10,20,40,80,1,1,1\n", None, 1, ["2147483647"]),
    ("mot-track-id-2^63", "mot", f"1,{2**63},10,20,40,80,1,1,1\n", None, 1, ["2147483647"]),
    ("mot-wrong-columns", "mot", GT + "2,1,10,20,40\n", None, 2, ["found 5"]),
    ("mot-bad-utf8", "mot", GT.encode() + b"2,1,10,20,40,80,1,1,1 \xff\xfe\n", None, 2, ["UTF-8"]),
    ("mot-empty-file", "mot", "", None, 0, ["no tracks"]),
    ("mot-huge-class", "mot", f"1,1,10,20,40,80,1,{BEYOND_FLOAT},1\n", None, 1, ["class"]),
    ("seqinfo-nan-rate", "mot", GT, SEQINFO.replace("frameRate=10", "frameRate=nan"), 4, ["frameRate"]),
    ("seqinfo-huge-length", "mot", GT, SEQINFO.replace("seqLength=50", f"seqLength={HUGE}"), 5, ["seqLength"]),
    ("seqinfo-nul", "mot", GT, SEQINFO.replace("name=s", "name=s\x00"), 2, ["name", "NUL"]),
    ("json-deep-nesting", "json", "[" * 100_000 + "]" * 100_000, None, 1, ["nest"]),
    ("json-huge-int", "json", _tubes(_tube(boxes=f"[[0, 10, 20, {HUGE}, 100]]")), None, 3, ["x2"]),
    ("json-int-beyond-float", "json", _tubes(_tube(boxes=f"[[0, 10, 20, {BEYOND_FLOAT}, 100]]")), None, 3,
     ["x2"]),
    ("json-huge-id", "json", _tubes(_tube(id=HUGE)), None, 3, ["id"]),
    ("json-id-2^31", "json", _tubes(_tube(id=str(2**31))), None, 3, ["id", "2147483647"]),
    ("json-id-2^63", "json", _tubes(_tube(id=str(2**63))), None, 3, ["id", "2147483647"]),
    ("json-lone-surrogate-caption", "json", _tubes(_tube(caption='"a man \\ud800 walks"')), None, 3,
     ["caption", "surrogate"]),
    ("json-nul-category", "json", _tubes(_tube(category='"per\\u0000son"')), None, 3, ["category", "NUL"]),
    ("json-infinity", "json", _tubes(_tube(boxes="[[0, 10, 20, Infinity, 100]]")), None, 3, ["x2", "finite"]),
    ("json-negative-box", "json", _tubes(_tube(boxes="[[0, -50, 20, -10, 100]]")), None, 3,
     ["outside the 640x360 frame"]),
    ("json-not-utf8", "json", b'{"format": "trajlab-tubes/1", "tubes": []}\n"\xc3\x28"', None, 2, ["UTF-8"]),
    ("csv-empty-file", "csv", "", None, 0, ["empty"]),
    ("csv-header-only", "csv", CSV_HEAD, None, 0, ["no tracks"]),
    ("csv-nul-category", "csv", CSV_HEAD + CSV_ROW + "2,0,10,20,50,100,per\x00son\n", None, 3, ["category", "NUL"]),
    ("csv-track-id-2^63", "csv", CSV_HEAD + f"{2**63},0,10,20,50,100,person\n", None, 2, ["2147483647"]),
    ("csv-huge-int", "csv", CSV_HEAD + f"1,0,10,20,{BEYOND_FLOAT},100,person\n", None, 2, ["x2"]),
    ("csv-wrong-columns", "csv", CSV_HEAD + CSV_ROW + "1,1,10,20,50\n", None, 3, ["found 5"]),
    ("csv-negative-frame", "csv", CSV_HEAD + "1,-3,10,20,50,100,person\n", None, 2, ["frame -3"]),
    ("csv-huge-score", "csv", "track_id,frame,x1,y1,x2,y2,score\n1,0,10,20,50,100,1e300\n", None, 2, ["score"]),
]


def _post(client, video, fmt: str, data, seqinfo):
    name = {"mot": "gt.txt", "json": "tubes.json", "csv": "tracks.csv"}[fmt]
    body = {"file": SimpleUploadedFile(name, data if isinstance(data, bytes) else data.encode("utf-8")),
            "video": video.pk, "format": fmt, "source": "probe"}
    if seqinfo is not None:
        body["seqinfo"] = SimpleUploadedFile("seqinfo.ini", seqinfo.encode("utf-8"))
    return client.post("/api/track-imports/", body, format="multipart")


@pytest.mark.parametrize("fmt,data,seqinfo,line,words", [v[1:] for v in VARIANTS], ids=[v[0] for v in VARIANTS])
def test_a_malformed_track_file_is_a_400_naming_its_line_and_nothing_is_stored(db, media_root, manager_client,
                                                                               fmt, data, seqinfo, line, words):
    video = video_factory(split="train", frame_count=50)
    response = _post(manager_client, video, fmt, data, seqinfo)
    assert response.status_code == 400, response.content[:500]
    body = response.json()
    assert body["code"] == "invalid_track_file", body
    problem = body["extra"]["problems"][0]
    assert problem["line"] == line, body
    for word in words or []:
        assert word in problem["message"], body
    assert len(body["message"]) < 2000                 # a huge value is never echoed whole
    assert not ProposalRun.objects.exists() and not TrackImport.objects.exists()
    assert not ProposalConfig.objects.exists() and not Trajectory.objects.exists()
    assert manager_client.get("/api/track-imports/").status_code == 200


def test_seqinfo_interpolation_is_read_as_written(db, media_root, manager_client):
    """``%(x)s`` in seqinfo.ini is no interpolation (it was a 500): the name is the text itself."""
    video = video_factory(split="train", frame_count=1)
    seqinfo = SEQINFO.replace("name=s", "name=%(x)s").replace("seqLength=50", "seqLength=1")
    response = _post(manager_client, video, "mot", GT, seqinfo)
    assert response.status_code == 202, response.json()
    assert TrackImport.objects.get().counts["rows"] == 1


def test_captions_stored_before_text_was_checked_are_repaired():
    """SQLite kept the JSON escape ``"\\ud800"`` of a caption, and every list of imports failed to
    render it since: the migration replaces a lone surrogate with U+FFFD and drops a NUL."""
    import importlib

    migration = importlib.import_module("trajectories.migrations.0008_track_import_file_and_fit")
    assert migration._repaired("a man \ud800 walks\x00") == "a man \ufffd walks"
    assert migration._repaired("a man 🚶 walks") == "a man 🚶 walks"
