from __future__ import annotations

import cv2
import numpy as np
import pytest

from models.backends.tracking.base import TrackProposal
from tests.conftest import write_video
from tests.trajectories.factories import run_factory
from trajectories.services.ingestion import video_import
from trajectories.services.proposals import trajectories_store

pytestmark = pytest.mark.django_db


def decode(response) -> np.ndarray:
    assert response["Content-Type"] == "image/jpeg"
    return cv2.imdecode(np.frombuffer(response.content, np.uint8), cv2.IMREAD_COLOR)


@pytest.fixture
def stored(media_root, tmp_path):
    truth: list = []
    path = write_video(tmp_path / "walk.mp4", n_frames=40, size=(320, 240), boxes=truth)
    video = video_import(path=path, source="cam").video
    run = run_factory(video=video)
    frames = np.arange(0, 40, 2)
    boxes = np.array([truth[f] for f in frames], dtype=np.float32)
    trajectories_store(run=run, proposals=[TrackProposal(1, "person", frames, boxes, np.ones(len(frames)))])
    return video, run.trajectories.get(), truth


def test_frame_is_the_decoded_frame(stored, client_for, annotator):
    video, _, truth = stored
    client = client_for(annotator)
    image = decode(client.get(f"/api/videos/{video.pk}/frames/17.jpg"))
    assert image.shape == (240, 320, 3)
    x1, y1, x2, y2 = truth[17]
    # The red rectangle is where the generator drew it on frame 17.
    patch = image[y1 + 5:y2 - 5, x1 + 5:x2 - 5].reshape(-1, 3).mean(axis=0)
    assert patch[2] > 150 and patch[0] < 90
    small = decode(client.get(f"/api/videos/{video.pk}/frames/17.jpg?max_size=100"))
    assert max(small.shape[:2]) == 100


def test_frame_errors(stored, client_for, annotator):
    video, _, _ = stored
    client = client_for(annotator)
    r = client.get(f"/api/videos/{video.pk}/frames/40.jpg")
    assert r.status_code == 404 and r.json()["code"] == "frame_out_of_range"
    assert client.get(f"/api/videos/{video.pk}/frames/3.jpg?max_size=5").json()["code"] == "invalid_max_size"
    assert client.get(f"/api/videos/{video.pk}/frames/3.jpg?max_size=big").status_code == 400
    assert client.get("/api/videos/999999/frames/3.jpg").status_code == 404


def test_crops_and_marked_frames(stored, client_for, annotator):
    video, trajectory, truth = stored
    client = client_for(annotator)
    listing = client.get(f"/api/trajectories/{trajectory.pk}/crops/?n=5").json()
    assert [c["frame_index"] for c in listing] == sorted(c["frame_index"] for c in listing)
    assert len(listing) == 5 and listing[0]["frame_index"] == 0 and listing[-1]["frame_index"] == 38
    crop = decode(client.get(listing[1]["crop_url"]))
    x1, y1, x2, y2 = listing[1]["box"]
    assert abs(crop.shape[1] - (x2 - x1) * 1.2) <= 3 and abs(crop.shape[0] - (y2 - y1) * 1.2) <= 3
    marked = decode(client.get(f"/api/trajectories/{trajectory.pk}/marked/10.jpg"))
    plain = decode(client.get(f"/api/videos/{video.pk}/frames/10.jpg"))
    x1, y1, x2, y2 = truth[10]
    diff = np.abs(marked.astype(int) - plain.astype(int)).sum(axis=2) > 60
    assert diff[y1 - 2:y1 + 3, x1:x2].any() and diff[y2 - 2:y2 + 3, x1:x2].any()  # the box edges are drawn
    assert not diff[:, : max(0, x1 - 10)].any() or x1 < 12                       # nothing far left of it
    r = client.get(f"/api/trajectories/{trajectory.pk}/crops/11.jpg")  # odd frames have no observation
    assert r.status_code == 404 and r.json()["code"] == "no_observation"


def test_encoded_images_are_made_once_per_key_and_kept_within_their_bytes(stored, client_for, annotator, monkeypatch):
    from models.media.video import EncodedImages
    from trajectories import selectors

    video, trajectory, _ = stored
    monkeypatch.setattr(selectors, "_encoded", EncodedImages(max_bytes=2**20))
    made = []
    real = selectors.encode_jpeg
    monkeypatch.setattr(selectors, "encode_jpeg", lambda *a, **k: made.append(k.get("max_size")) or real(*a, **k))
    client = client_for(annotator)
    first = client.get(f"/api/trajectories/{trajectory.pk}/crops/10.jpg?max_size=160").content
    again = client.get(f"/api/trajectories/{trajectory.pk}/crops/10.jpg?max_size=160").content
    assert first == again and made == [160]                       # the second reviewer's crop is the first's
    client.get(f"/api/trajectories/{trajectory.pk}/crops/10.jpg?max_size=80")
    client.get(f"/api/videos/{video.pk}/frames/10.jpg?max_size=160")
    assert made == [160, 80, 160]                                 # another size, and the frame, are their own
    # the bytes bound holds: a cache with room for about one crop keeps only the latest
    small = EncodedImages(max_bytes=len(first) + 10)
    monkeypatch.setattr(selectors, "_encoded", small)
    for index in (10, 12, 14):
        client.get(f"/api/trajectories/{trajectory.pk}/crops/{index}.jpg?max_size=160")
    assert len(small._images) == 1 and small._bytes <= small.max_bytes
