"""``python manage.py train``: inline with a progress bar, queued, and its errors."""
from __future__ import annotations

import io
import json

import pytest
from django.core.management import CommandError, call_command

from tests.workers.factories import tiny_config
from workers.models import TrainingRun

pytestmark = pytest.mark.django_db


def test_train_inline_from_a_config_file(snapshots, var_dir, tmp_path):
    config = tmp_path / "train.json"
    config.write_text(json.dumps(tiny_config(steps=4)))
    out = io.StringIO()
    call_command("train", "--snapshot", str(snapshots["train"].pk), "--model", "vtrajembed", "--config", str(config),
                 "--eval-snapshot", str(snapshots["dev"].pk), stdout=out, stderr=io.StringIO())
    run = TrainingRun.objects.get()
    assert run.status == "succeeded" and run.steps_done == 4 and run.eval_snapshot_id == snapshots["dev"].pk
    text = out.getvalue()
    assert f"training run #{run.pk} finished 4 steps" in text
    assert f"t2traj  R@1 {run.metrics['t2traj']['R@1']:.1f}" in text and "random  R@1" in text


def test_train_queued(snapshots, monkeypatch, django_capture_on_commit_callbacks):
    from common.jobs import runs

    sent = []
    monkeypatch.setattr(runs.current_app, "send_task", lambda name, args=None, **options: sent.append((args, options)))
    out = io.StringIO()
    with django_capture_on_commit_callbacks(execute=True):
        call_command("train", "--snapshot", str(snapshots["train"].pk), "--model", "scout", "--config",
                     '{"steps": 3, "batch_size": 2}', "--allow-train-split", "--queue", stdout=out)
    run = TrainingRun.objects.get()
    assert run.status == "queued" and run.model_kind == "scout" and run.steps_total == 3
    assert run.eval_snapshot is None and run.eval_stamps == ["train-split"]
    assert sent == [([run.pk], {"queue": "gpu"})] and f"training run #{run.pk} queued" in out.getvalue()


@pytest.mark.parametrize(("args", "message"), [
    (["--snapshot", "999999", "--model", "vtrajembed"], "--snapshot 999999: no such relation snapshot"),
    (["--model", "vtrajembed", "--config", "{not json"], "--config is not valid JSON"),
    (["--model", "vtrajembed", "--config", "/no/such/file.json"], "neither a JSON object nor a readable file"),
    (["--model", "vtrajembed", "--config", "[1]"], "neither a JSON object"),
    (["--model", "rnn"], "unknown model kind 'rnn'"),
    (["--model", "vtrajembed", "--config", '{"steps": -1}'], "invalid training config"),
    (["--model", "vtrajembed", "--eval-snapshot", "999999"], "--eval-snapshot 999999"),
    (["--model", "vtrajembed"], "is the model's own training snapshot: its figures would measure fit"),
])
def test_clear_errors(snapshots, args, message):
    if "--snapshot" not in args:
        args = ["--snapshot", str(snapshots["train"].pk), *args]
    with pytest.raises(CommandError, match=message.replace("(", r"\(").replace("[", r"\[")):
        call_command("train", *args, stdout=io.StringIO())
    assert not TrainingRun.objects.exists()
