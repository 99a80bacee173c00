"""The manager's import form in real Chromium against a live server: a bad tracks file is refused
with its line numbers and nothing stored; the MOTChallenge ground truth of a rendered scene is
imported as a reviewed run that appears in the runs table. The proposal-run form asks each
tracker for its own files, shows the server's refusals and queues a run."""
from __future__ import annotations

import re

import numpy as np
import pytest
from playwright.sync_api import expect

from models.tracks_io.mot import format_mot
from models.tracks_io.records import ImportedTrack
from trajectories.models import ProposalConfig, ProposalRun, TrackImport

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_import_form_refuses_a_bad_file_then_imports_mot_ground_truth(people, scene_video, rendered_scene, open_page,
                                                                       tmp_path, shot):
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
    form.get_by_role("button", name="Import").click()
    expect(form.get_by_role("status")).to_have_text(re.compile(r"Imported 3 tracks as run \d+ \(reviewed\)"))
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
