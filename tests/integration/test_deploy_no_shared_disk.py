"""A deployment whose hosts share no disk, driven over HTTP as a script would drive it.

Two web processes (gunicorn on ``config.wsgi``), a ``cpu`` worker and a ``gpu`` worker (on the CPU
here), each with its own folder, share only the test database, Redis and a SeaweedFS bucket
(``TRAJLAB_STORAGE_URL``). A manager and three annotators, signed in for tokens (one annotator
through the sign-in form, with a session cookie), talk to both web hosts in turn: a video is
uploaded (staged in the bucket, imported by the worker), a tracker runs, three annotators vote,
the pool is frozen, described, queries are written and their rows labelled, a snapshot is taken,
a short training run stores its checkpoints in the bucket, its worker is killed outright mid-run
and a new ``gpu`` host with an empty folder resumes it from the bucket, the run is evaluated, and
a release is published to the bucket, downloaded from the other web host and checked file by file.
No folder holds another's files and no record names a local path.

The timeline (seconds from the start for each step) is printed (``-s``) and written to
``VAR_DIR/deploy_timeline.json``."""
from __future__ import annotations

import hashlib
import io
import os
import re
import signal
import tarfile
import time
import uuid

import cv2
import numpy as np
import pytest
from botocore.exceptions import ClientError
from django.conf import settings

from accounts.services import user_create
from tests.integration.hosts import Api, Cluster, Timeline, check_folders_apart, records_naming
from tests.integration.test_worker import _purge_queues, _require_production_mode
from tests.workers.factories import tiny_config
from workers.models import TrainingRun

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]
PASSWORD = "deploy-test-password"
ANNOTATORS = ("ann1", "ann2", "ann3")
STEPS, CHECKPOINT_EVERY = 60, 10
TERMINAL = ("succeeded", "failed", "cancelled")


def _two_lane_video(path, *, n_frames: int = 40, size=(320, 240)) -> bytes:
    """Two objects on a noise background: a red block crossing left to right in the upper lane and
    a green one right to left in the lower lane. Returns the file's bytes."""
    rng = np.random.default_rng(0)
    w, h = size
    background = rng.integers(40, 90, size=(h, w, 3), dtype=np.uint8)
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"mp4v"), 10.0, (w, h))
    for i in range(n_frames):
        frame = background.copy()
        x = int(5 + i * (w - 45) / (n_frames - 1))
        frame[30:90, x:x + 30] = (30, 30, 220)
        frame[150:210, w - 35 - x:w - 5 - x] = (40, 200, 40)
        writer.write(frame)
    writer.release()
    return path.read_bytes()


@pytest.fixture
def cluster(s3_server, s3_bucket, tmp_path):
    _require_production_mode()
    _purge_queues()
    hosts = Cluster(tmp_path / "hosts", s3_server, f"s3://{s3_bucket}/deploy-{uuid.uuid4().hex[:8]}")
    yield hosts
    hosts.stop_all()
    _purge_queues()


def _wait(api: Api, path: str, done, *, on: int, cluster: Cluster, timeout: float = 120.0, what: str = ""):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        body = api.call("GET", path, on=on).json()
        if done(body):
            return body
        for host in cluster.hosts:
            if host.role != "web" and host.proc.poll() is not None and not getattr(host, "killed", False):
                pytest.fail(f"{host.name} exited ({host.proc.returncode}):\n{host.log_tail()}")
        time.sleep(0.25)
    pytest.fail(f"{what or path} not done in {timeout:.0f} s: {body}\n{cluster.logs()}")


def _run_done(body: dict) -> bool:
    return body["status"] in TERMINAL and (body.get("job") is None or body["job"]["status"] in TERMINAL)


def _succeeded(body: dict, cluster: Cluster, what: str) -> dict:
    assert body["status"] == "succeeded", (what, body.get("error"), cluster.logs())
    return body


def _review(people: dict[str, Api], stage: str, vote) -> int:
    """Every annotator claims and votes on ``stage`` items (each on the web host of their turn)
    until none is left for anyone; returns the votes cast."""
    cast, turn = 0, 0
    while True:
        progressed = False
        for api in people.values():
            turn += 1
            r = api.call("POST", "/api/review/next/", json={"stage": stage}, on=turn, expect=(200, 204))
            if r.status_code == 204:
                continue
            seat = r.json()
            api.call("POST", f"/api/review/items/{seat['item']}/votes/", on=turn + 1,
                     json={"client_request_id": str(uuid.uuid4()), "time_spent_ms": 900, **vote(seat)})
            cast, progressed = cast + 1, True
        if not progressed:
            return cast


def _facts(content: dict) -> set[tuple[str, str]]:
    return {(f["name"], str(f["value"])) for f in content.get("facts", []) if f.get("known", True)}


def _bucket_keys(cluster: Cluster, prefix: str) -> dict[str, dict]:
    bucket, _, root = cluster.storage_url.removeprefix("s3://").partition("/")
    client = cluster.s3.client()
    out = {}
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=f"{root}/{prefix}"):
        for obj in page.get("Contents", []):
            out[obj["Key"].removeprefix(f"{root}/")] = obj
    return out


def _head_sha256(cluster: Cluster, key: str) -> str | None:
    """The sha256 stored with the object ``key``; None when there is no such object."""
    bucket, _, root = cluster.storage_url.removeprefix("s3://").partition("/")
    try:
        head = cluster.s3.client().head_object(Bucket=bucket, Key=f"{root}/{key}")
    except ClientError as exc:
        if exc.response["Error"]["Code"] in ("404", "NoSuchKey"):
            return None
        raise
    return head["Metadata"].get("sha256", "")


def _named_checkpoint_stored(manager: Api, cluster: Cluster, seen: dict) -> dict:
    """The running training run's row, read again until the checkpoint it names is in the bucket
    with the sha256 the row records. The worker goes on while this looks: a checkpoint missing from
    the bucket must have been replaced, so the row read next names a later step."""
    for _ in range(20):
        sha = _head_sha256(cluster, seen["checkpoint_key"])
        if sha is not None:
            assert sha == seen["checkpoint_sha256"], (seen, sha)
            return seen
        step = seen["checkpoint_step"]
        seen = manager.call("GET", f"/api/training-runs/{seen['id']}/", on=0).json()
        assert seen["checkpoint_step"] > step or seen["status"] != "running", (
            f"the row names checkpoint {step}, which is not in the bucket", seen)
        if seen["status"] != "running":
            return seen
    raise AssertionError(f"no checkpoint the row named was found in the bucket: {seen}")


def test_the_pipeline_across_hosts_that_share_no_disk(cluster, tmp_path):
    clock = Timeline()
    web1 = cluster.start_web("web-1", TRAJLAB_SYNC_IMPORT_BYTES="1000")
    web2 = cluster.start_web("web-2", TRAJLAB_SYNC_IMPORT_BYTES="1000")
    cluster.start_worker("cpu-1", "cpu")
    gpu = cluster.start_worker("gpu-1", "gpu")
    user_create(username="manager", password=PASSWORD, roles=["manager"])
    for name in ANNOTATORS:
        user_create(username=name, password=PASSWORD, roles=["annotator"])
    cluster.wait_ready(web1)
    cluster.wait_ready(web2)
    clock.mark("two web hosts ready (/readyz), two workers started")

    manager = Api(cluster, "manager", PASSWORD)
    people = {name: Api(cluster, name, PASSWORD) for name in ANNOTATORS[:2]}
    people[ANNOTATORS[2]] = Api(cluster, ANNOTATORS[2], PASSWORD, browser=True, on=1)   # a session, from web-2
    clock.mark("four users signed in (three tokens, one session through the sign-in form)")

    # a video uploaded to web-1, staged in the bucket, imported by the cpu worker
    data = _two_lane_video(tmp_path / "lanes.mp4")
    r = manager.call("POST", "/api/videos/", on=0, files={"file": ("lanes.mp4", data, "video/mp4")},
                     data={"source": "deploy-test"}, expect=(202,))
    job = _wait(manager, f"/api/jobs/{r.json()['job']['id']}/", lambda b: b["status"] in TERMINAL, on=1,
                cluster=cluster, what="the import")
    assert job["status"] == "succeeded", (job, cluster.logs())
    video = manager.call("GET", f"/api/videos/{job['result']['video']}/", on=1).json()
    sha = hashlib.sha256(data).hexdigest()
    assert f"videos/{sha[:2]}/{sha}.mp4" in _bucket_keys(cluster, "videos/")
    clock.mark("video uploaded via web-1, imported by cpu-1 into the bucket")

    manager.call("POST", "/api/splits/assign/", on=1, json={"seed": 0, "ratios": {"train": 1}})
    config = manager.call("POST", "/api/proposal-configs/", on=0, json={
        "name": "deploy", "backend": "hog-bytetrack", "categories": ["moving object"]}).json()
    r = manager.call("POST", "/api/proposal-runs/", on=1, json={"video": video["id"], "config": config["id"]})
    assert r.json()["job"]["queue"] == "cpu"
    run = _succeeded(_wait(manager, f"/api/proposal-runs/{r.json()['id']}/", _run_done, on=0, cluster=cluster),
                     cluster, "proposal run")
    assert run["trajectory_count"] >= 2, run
    clock.mark(f"proposal run on cpu-1: {run['trajectory_count']} trajectories")

    lanes = {}
    for t in manager.call("GET", f"/api/trajectories/?run={run['id']}&limit=100", on=1).json()["results"]:
        detail = manager.call("GET", f"/api/trajectories/{t['id']}/", on=0).json()
        boxes = np.asarray(detail["boxes"], dtype=float)
        lanes[t["id"]] = ("upper" if np.median((boxes[:, 1] + boxes[:, 3]) / 2) < 120 else "lower", len(boxes))

    def curation_vote(seat):
        target = seat["target"]
        if seat["stage"] == "usability":
            return {"label": "usable" if lanes[target["trajectory"]][1] >= 5 else "unusable"}
        same = lanes[target["trajectory_a"]][0] == lanes[target["trajectory_b"]][0]
        return {"label": "same" if same else "different"}

    votes = _review(people, "usability", curation_vote) + _review(people, "identity", curation_vote)
    assert votes >= 3 * 2
    clock.mark(f"three annotators: {votes} usability and identity votes over both web hosts")

    pool = manager.call("POST", "/api/pools/", on=1, json={"run": run["id"]}).json()
    assert pool["n_members"] >= 2, pool
    clock.mark(f"pool frozen ({pool['n_members']} members)")

    r = manager.call("POST", "/api/description-runs/", on=0, json={"pools": [pool["id"]]})
    _succeeded(_wait(manager, f"/api/description-runs/{r.json()['id']}/", _run_done, on=1, cluster=cluster),
               cluster, "description run")
    clock.mark("description run on cpu-1")
    facts: dict[int, set] = {}

    def description_vote(seat):
        target = seat["target"]
        facts[target["trajectory"]] = _facts(target["description"]["content"])
        return {"label": "usable"}

    votes = _review(people, "description", description_vote)
    clock.mark(f"descriptions reviewed ({votes} votes)")

    r = manager.call("POST", "/api/generation-runs/", on=1, json={"pools": [pool["id"]]})
    _succeeded(_wait(manager, f"/api/generation-runs/{r.json()['id']}/", _run_done, on=0, cluster=cluster),
               cluster, "generation run")
    clock.mark("query generation on cpu-1")

    def relation_vote(seat):
        row = seat["target"]["relation_row"]
        wanted = {(p["name"], str(p["value"])) for p in row["predicates"]}
        judgments = {str(c["trajectory"]): int(wanted <= facts.get(c["trajectory"], set()))
                     for c in row["candidates"]}
        return {"label": "reviewed", "judgments": judgments,
                "payload": {"faithful": True, "natural": 4} if row["rate_query"] else None}

    votes = _review(people, "relation", relation_vote)
    clock.mark(f"relation rows labelled ({votes} votes)")

    snapshot = manager.call("POST", "/api/snapshots/", on=0, json={"split": "train", "name": "deploy"}).json()
    keys = _bucket_keys(cluster, "snapshots/")
    assert snapshot["counts"]["n_queries"] >= 1 and keys, (snapshot, keys)
    clock.mark(f"snapshot {snapshot['id']} sealed in the bucket ({snapshot['counts']['n_queries']} queries)")

    r = manager.call("POST", "/api/training-runs/", on=1, json={
        "snapshot": snapshot["id"], "eval_snapshot": snapshot["id"], "allow_train_split": True, "model_kind": "vtrajembed",
        "config": tiny_config(steps=STEPS, checkpoint_every=CHECKPOINT_EVERY)})
    run_id = r.json()["id"]
    assert r.json()["job"]["queue"] == "gpu"
    seen = _wait(manager, f"/api/training-runs/{run_id}/",
                 lambda b: b["checkpoint_step"] or b["status"] in TERMINAL, on=0, cluster=cluster, timeout=240,
                 what="the first stored checkpoint")
    assert seen["status"] == "running" and seen["checkpoint_key"].startswith(f"training/{run_id}/"), seen
    seen = _named_checkpoint_stored(manager, cluster, seen)
    assert seen["status"] == "running", seen
    clock.mark(f"training on gpu-1: checkpoint of step {seen['checkpoint_step']} in the bucket")

    os.killpg(gpu.proc.pid, signal.SIGKILL)
    gpu.proc.wait(timeout=30)
    gpu.killed = True
    killed = TrainingRun.objects.get(pk=run_id)
    assert killed.status == "running" and killed.steps_done < STEPS, (killed.status, killed.steps_done)
    clock.mark(f"gpu-1 killed (SIGKILL) at step {killed.steps_done}")
    cluster.start_worker("gpu-2", "gpu", CELERY_VISIBILITY_TIMEOUT="1")
    job_path = f"/api/jobs/{seen['job']['id']}/"
    _wait(manager, job_path, lambda b: b["attempts"] == 2, on=0, cluster=cluster, timeout=120, what="the redelivery")
    clock.mark("gpu-2 (empty folder) took the run up again")
    done = _succeeded(_wait(manager, f"/api/training-runs/{run_id}/", _run_done, on=1, cluster=cluster, timeout=300),
                      cluster, "training run")
    resumed_from = done["resumes"][0]["from_step"]
    assert done["steps_done"] == STEPS and manager.call("GET", job_path, on=1).json()["attempts"] == 2
    assert CHECKPOINT_EVERY <= resumed_from <= killed.steps_done and resumed_from % CHECKPOINT_EVERY == 0
    assert done["checkpoint_step"] == STEPS and _head_sha256(cluster, done["checkpoint_key"]) == \
        done["checkpoint_sha256"]
    stored = list(_bucket_keys(cluster, f"training/{run_id}/"))
    named = [done["checkpoint_key"], f"training/{run_id}/result.json", f"training/{run_id}/steps.jsonl"]
    # gpu-1 may die between naming a newer checkpoint on the row and removing the one before it:
    # that older checkpoint (before the step gpu-2 resumed from) is left for the storage sweep
    # (workers/storage_sweep.py), which removes checkpoints no run names; nothing else may be left
    left = [k for k in stored if k not in named]
    assert [k for k in stored if k in named] == named, stored
    assert all(re.fullmatch(rf"training/{run_id}/checkpoint-(\d{{8}})\.pt", k)
               and int(k.rsplit("-", 1)[1][:8]) < resumed_from for k in left), (left, resumed_from)
    check_folders_apart(cluster)
    clock.mark(f"gpu-2 resumed from step {resumed_from} (read from the bucket) and finished {STEPS} steps")

    evaluation = manager.call("GET", f"/api/evaluation-runs/{done['evaluation']}/", on=0).json()
    assert evaluation["status"] == "succeeded" and evaluation["metrics"]["t2traj"]["n_queries"] >= 1, evaluation
    clock.mark("evaluation on the snapshot")

    release = manager.call("POST", "/api/releases/", on=1, json={
        "name": "deploy", "version": "1.0.0", "splits": ["train"]}).json()
    stored = _bucket_keys(cluster, "releases/deploy/1.0.0/")
    assert "releases/deploy/1.0.0/SHA256SUMS" in stored, sorted(stored)
    clock.mark(f"release exported to the bucket ({len(stored)} objects)")
    assert manager.call("GET", f"/api/releases/{release['id']}/verify/", on=0).json()["ok"]
    r = manager.call("GET", f"/api/releases/{release['id']}/download/", on=0)
    sums_text = manager.call("GET", f"/api/releases/{release['id']}/SHA256SUMS", on=1).text
    assert hashlib.sha256(sums_text.encode()).hexdigest() == r.headers["X-Manifest-SHA256"]
    with tarfile.open(fileobj=io.BytesIO(r.content)) as tar:
        members = {m.name.split("/", 1)[1]: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}
    sums = dict(reversed(line.split(None, 1)) for line in sums_text.splitlines() if line.strip())
    sums = {name.lstrip("*"): digest for name, digest in sums.items()}
    assert members["SHA256SUMS"].decode() == sums_text and sums
    for name, digest in sums.items():
        assert hashlib.sha256(members[name]).hexdigest() == digest, name
    clock.mark(f"release downloaded from web-1 and verified ({len(sums)} files)")

    files = check_folders_apart(cluster)
    assert records_naming([str(tmp_path), str(settings.VAR_DIR)]) == []
    assert any(p.suffix == ".pt" for p in (tmp_path / "hosts" / "gpu-2" / "cache").rglob("*"))   # from the bucket
    assert any((tmp_path / "hosts" / "web-1" / "var" / "releases").rglob("SHA256SUMS"))         # its own copy
    clock.mark("no folder holds another's files; no record names a local path")
    for name, folders in files.items():
        print(f"  {name}: " + ", ".join(f"{folder} {n}" for folder, n in sorted(folders.items())))
    clock.write(settings.VAR_DIR / "deploy_timeline.json")
    print(f"timeline written to {settings.VAR_DIR / 'deploy_timeline.json'}")
