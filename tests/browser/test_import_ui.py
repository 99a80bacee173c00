"""The manager's import form in real Chromium against a live server: a bad tracks file is refused
with its line numbers and nothing stored; the MOTChallenge ground truth of a rendered scene is
imported as a reviewed run (its job run by a worker thread here) that appears in the runs table; a
file made for another video (TUD-Campus, 640x480) shows its boxes past the frame over the video's
first frame and is imported only with "Import anyway" ticked; a CVAT for video file (told by its
name) and a Label Studio export (picked from the list) come in the same way. The proposal-run form asks each
tracker for its own files, shows the server's refusals and queues a run."""
from __future__ import annotations

import re
import threading
from pathlib import Path

import motmetrics
import numpy as np
import pytest
from django.db import connection
from playwright.sync_api import expect

from common.jobs import runs as runs_module
from models.tracks_io.mot import format_mot
from models.tracks_io.records import ImportedTrack
from trajectories.models import ProposalConfig, ProposalRun, TrackImport
from trajectories.tasks import crop_strips_task, proposal_run_task

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
TUD_CAMPUS = Path(motmetrics.__file__).parent / "data" / "TUD-Campus" / "gt.txt"


@pytest.fixture
def worker(monkeypatch):
    """A worker for the queued import jobs: each task handed to the broker runs in a thread (as a
    Celery worker would run it), and the test waits for them before the database goes away."""
    threads: list[threading.Thread] = []

    def run(name, args=None, queue=None, **kwargs):
        tasks = {"trajectories.tasks.proposal_run_task": proposal_run_task,
                 "trajectories.tasks.crop_strips_task": crop_strips_task}   # a stored run's crop strips
        assert name in tasks and queue == "cpu", (name, queue)

        def work():
            try:
                tasks[name](*args)
            finally:
                connection.close()

        kind = "worker" if name.endswith("proposal_run_task") else "crops"
        threads.append(threading.Thread(target=work, name=f"{kind}-{args[0]}"))
        threads[-1].start()

    monkeypatch.setattr(runs_module.current_app, "send_task", run)
    yield threads
    for thread in threads:
        thread.join(timeout=60)


def test_import_form_refuses_a_bad_file_then_imports_mot_ground_truth(people, scene_video, rendered_scene, open_page,
                                                                       tmp_path, shot, worker):
    _, truth = rendered_scene
    tracks = []
    for p in truth.people:
        frames = p.frames()
        tracks.append(ImportedTrack(track_id=p.id + 1, category="person", frames=frames,
                                    boxes=np.array([p.boxes[f] for f in frames], float),
                                    scores=np.ones(len(frames)), lines=np.zeros(len(frames), int)))
    good = tmp_path / "gt" / "gt.txt"
    good.parent.mkdir()
    good.write_text(format_mot(tracks))
    bad = tmp_path / "bad.csv"
    bad.write_text("track_id,frame,x1,y1,x2,y2\n1,0,10,20,50,100\n1,0,12,20,52,100\n1,2,10,20,nan,100\n")

    page = open_page("boss")
    page.goto("/manage/runs")
    form = page.get_by_role("form", name="Import tracks")
    form.get_by_label("Video", exact=True).select_option(str(scene_video.pk))
    form.get_by_label("Source", exact=True).fill("lab tracker export")

    # a bad file: every problem with its line, nothing stored
    form.get_by_label("File", exact=True).set_input_files(str(bad))
    expect(form.get_by_label("Format", exact=True)).to_have_value("csv")
    form.get_by_role("button", name="Import").click()
    problems = form.get_by_role("list", name="Problems in the file")
    expect(problems).to_contain_text("line 3: track 1 appears twice on frame 0")
    expect(problems).to_contain_text("line 4: x2 is not a finite number")
    assert not ProposalRun.objects.exists()

    # the rendered scene's ground truth as MOTChallenge gt.txt: a reviewed imported run
    form.get_by_label("File", exact=True).set_input_files(str(good))
    expect(form.get_by_label("Format", exact=True)).to_have_value("mot")
    form.get_by_label("Source", exact=True).fill("ui_walk ground truth")
    expect(form.get_by_role("figure")).to_contain_text("3 boxes from the file")        # checked, with its preview
    form.get_by_role("button", name="Import").click()
    expect(form.get_by_role("status")).to_have_text(re.compile(r"Imported 3 tracks as run \d+ \(reviewed\)"))
    assert sum(t.name.startswith("worker-") for t in worker) == 1                     # stored by its job
    record = TrackImport.objects.get()
    assert record.format == "mot" and record.options["gt"] is True and record.source == "ui_walk ground truth"
    row = page.get_by_role("row").filter(has=page.get_by_text("imported", exact=True))
    expect(row).to_have_count(1)
    expect(row).to_contain_text(f"{record.run.trajectory_count}")
    shot(page, "import-tracks")


def test_proposal_run_form_offers_registered_trackers_refuses_bad_settings_and_queues_a_run(
        people, scene_video, open_page, settings, tmp_path):
    settings.TRAJLAB_BACKENDS = {"sam3-lab": {"backend": "sam3", "label": "SAM 3 of the lab",
                                              "settings": {"checkpoint": str(tmp_path / "elsewhere" / "sam3.pt")}}}
    page = open_page("boss")
    page.goto("/manage/runs")
    form = page.get_by_role("form", name="New proposal run")
    form.get_by_label("Video", exact=True).select_option(str(scene_video.pk))
    queue = form.get_by_role("button", name="Queue run")

    # a registered tracker brings its checkpoint: the form asks for no path at all
    form.get_by_label("Tracker", exact=True).select_option("sam3-lab")
    expect(form.get_by_label("Checkpoint", exact=True)).to_have_count(0)
    expect(form.get_by_label("Model config", exact=True)).to_have_count(0)
    expect(form).to_contain_text("Registered by the operator")
    queue.click()
    alert = form.get_by_role("alert")
    expect(alert).to_contain_text("No run was queued")
    expect(alert).to_contain_text("SAM 3 checkpoint not found")
    assert not ProposalConfig.objects.exists() and not ProposalRun.objects.exists()
    form.get_by_label("Tracker", exact=True).select_option("hog-bytetrack")

    # an unknown category is the server's 400, shown; then a good one queues a run
    form.get_by_label("Categories", exact=True).fill("person, flying saucer")
    queue.click()
    expect(form.get_by_role("alert")).to_contain_text("unknown category prompt 'flying saucer'")
    assert not ProposalConfig.objects.exists()
    form.get_by_label("Categories", exact=True).fill(" person ,person")
    form.get_by_label("Configuration name", exact=True).fill("walkway people")
    queue.click()
    expect(form.get_by_role("status")).to_have_text(
        re.compile(r"Queued run \d+ with walkway people v1 \(person\)\."))
    run = ProposalRun.objects.get()
    assert run.video_id == scene_video.pk and run.config.backend == "hog-bytetrack"
    assert run.config.name == "walkway people" and run.config.categories == ["person"]
    expect(form.get_by_role("status")).to_contain_text(f"run {run.pk}")
    expect(page.get_by_role("row").filter(has=page.get_by_text(scene_video.name))).not_to_have_count(0)


def test_a_file_of_another_video_shows_its_boxes_and_needs_import_anyway(people, scene_video, open_page, worker, shot):
    """Issue 27, finding 13: TUD-Campus (640x480) onto the 640x360 scene with "clip" ticked."""
    page = open_page("boss")
    page.goto("/manage/runs")
    form = page.get_by_role("form", name="Import tracks")
    form.get_by_label("Video", exact=True).select_option(str(scene_video.pk))
    form.get_by_label("Source", exact=True).fill("TUD-Campus ground truth")
    form.get_by_role("checkbox", name="clip boxes partly outside the frame").check()
    with page.expect_response(re.compile(rf"/api/videos/{scene_video.pk}/frames/0\.jpg")) as frame:
        form.get_by_label("File", exact=True).set_input_files(str(TUD_CAMPUS))
        # the check: what the file holds, the finding, and the first frame with the file's boxes
        findings = form.get_by_role("alert", name="The file may not belong to this video")
        expect(findings).to_contain_text("275 of 359 boxes reach past the video's 640x360 frame")
        preview = form.get_by_role("figure")
        expect(preview).to_have_accessible_name("Preview of video frame 0 with the file's boxes")
        expect(preview).to_contain_text("6 boxes from the file, 4 reaching past the frame")
    assert frame.value.status == 200 and frame.value.header_value("content-type") == "image/jpeg"
    expect(preview.locator("g.box")).to_have_count(6)
    expect(preview.locator("g.box.past")).to_have_count(4)
    expect(form.get_by_label("What the file holds")).to_contain_text("8 tracks, 359 boxes on frames 1–71")
    preview.get_by_role("button", name="frame 2").click()
    expect(preview).to_have_accessible_name("Preview of video frame 2 with the file's boxes")
    shot(page, "import-tracks-fit-preview")

    # Import waits for the confirmation; nothing is stored before it
    import_button = form.get_by_role("button", name="Import")
    expect(import_button).to_be_disabled()
    assert not ProposalRun.objects.exists() and not TrackImport.objects.exists()
    form.get_by_role("checkbox", name="Import anyway: the file may belong to another video").check()
    import_button.click()
    expect(form.get_by_role("status")).to_have_text(re.compile(r"Imported 8 tracks as run \d+ \(reviewed\)"),
                                                    timeout=60_000)
    record = TrackImport.objects.get()
    assert [f["code"] for f in record.fit_findings] == ["boxes_outside"] and record.options["clip"] is True
    assert record.run.status == "succeeded" and sum(t.name.startswith("worker-") for t in worker) == 1


EXAMPLES = Path(__file__).resolve().parents[2] / "docs" / "examples"


def test_import_form_brings_cvat_and_label_studio_annotations(people, scene_video, open_page, tmp_path, worker):
    # the documented examples, for the scene's 72 frames
    cvat = tmp_path / "annotations.xml"
    cvat.write_text((EXAMPLES / "cvat_for_video_1_1.xml").read_text()
                    .replace("<size>50</size>", "<size>72</size>").replace("<stop_frame>49", "<stop_frame>71"))
    studio = tmp_path / "project-1.json"
    studio.write_text((EXAMPLES / "label_studio_video.json").read_text().replace('"framesCount": 50', '"framesCount": 72'))
    page = open_page("boss")
    page.goto("/manage/runs")
    form = page.get_by_role("form", name="Import tracks")
    form.get_by_label("Video", exact=True).select_option(str(scene_video.pk))
    form.get_by_label("Source", exact=True).fill("CVAT task 5")

    form.get_by_label("File", exact=True).set_input_files(str(cvat))
    expect(form.get_by_label("Format", exact=True)).to_have_value("cvat")            # told by its name
    expect(form.get_by_role("figure")).to_contain_text("2 boxes from the file")
    form.get_by_role("button", name="Import").click()
    expect(form.get_by_role("status")).to_have_text(re.compile(r"Imported 2 tracks as run \d+ \(reviewed\)"))
    first = TrackImport.objects.get().run_id

    # a Label Studio export is a .json file too: it is picked from the list
    form.get_by_label("File", exact=True).set_input_files(str(studio))
    form.get_by_label("Format", exact=True).select_option("labelstudio")
    form.get_by_label("Source", exact=True).fill("Label Studio project 1")
    expect(form.get_by_role("figure")).to_contain_text("1 box from the file")
    form.get_by_role("button", name="Import").click()
    expect(form.get_by_role("status")).to_have_text(
        re.compile(rf"Imported 2 tracks as run (?!{first}\b)\d+ \(reviewed\)"))
    assert sorted(TrackImport.objects.values_list("format", flat=True)) == ["cvat", "labelstudio"]
