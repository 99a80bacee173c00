"""Model endpoints and model paths come from the operator's registry only (issue 27, finding 1):
a listener on another loopback address receives nothing from search, evaluation, experiment or
training requests that carry a URL, a path or an unregistered reaching backend; a registered name
reaches its endpoint and records show the name, never the URL; server paths are hidden from
non-managers."""
from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.workers.factories import finished_run, tiny_config
from workers import search as search_module
from workers.models import EvaluationRun, Experiment, TrainingRun

pytestmark = pytest.mark.django_db


class _Listener(BaseHTTPRequestHandler):
    posts: list[dict] = []

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        type(self).posts.append({"path": self.path, "body": body[:200]})
        answer = json.dumps({"choices": [{"message": {"content": "yes"}, "finish_reason": "stop"}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args):
        pass


@pytest.fixture
def listener():
    """An OpenAI-shaped endpoint on 127.0.0.2 (another loopback address) that counts its posts."""
    _Listener.posts = []
    server = ThreadingHTTPServer(("127.0.0.2", 0), _Listener)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.2:{server.server_address[1]}/v1", _Listener.posts
    server.shutdown()
    server.server_close()


@pytest.fixture
def staff(make_user, client_for):
    return {role: client_for(make_user(role)) for role in ("manager", "annotator")}


@pytest.fixture(autouse=True)
def fresh_process_caches():
    search_module._loaded.clear()
    yield
    search_module._loaded.clear()


def _reaching_pipelines(url: str) -> list[tuple[dict, str, str]]:
    endpoint = {"base_url": url, "model": "m"}
    return [
        ({"reranker": "pointwise", "scorer": {"backend": "openai", "settings": endpoint}},
         "location_in_request", "pipeline.scorer.settings.base_url"),
        ({"reranker": "pointwise", "scorer": {"backend": "openai"}}, "backend_not_registered", "pipeline.scorer"),
        ({"reranker": "pairwise", "comparator": {"kind": "vlm", "backend": "openai", "settings": endpoint}},
         "location_in_request", "pipeline.comparator.settings.base_url"),
        ({"reranker": "pairwise", "comparator": {"kind": "scorer", "backend": "transformers",
                                                 "settings": {"model_path": "/etc"}}},
         "location_in_request", "pipeline.comparator.settings.model_path"),
        ({"retrievers": ["rewrite"], "rewrite": {"backend": "openai", "settings": {"model": "m"}}},
         "backend_not_registered", "pipeline.rewrite"),
        ({"reranker": "pointwise", "scorer": {"backend": "heuristic", "settings": {"api_key_env": "DJANGO_SECRET_KEY"}}},
         "location_in_request", "pipeline.scorer.settings.api_key_env"),
    ]


def test_search_by_any_staff_member_never_reaches_an_unregistered_endpoint(snapshots, staff, trained_dirs, var_dir,
                                                                        listener):
    url, posts = listener
    run = finished_run(snapshots, trained_dirs["vtrajembed"])
    for pipeline, code, field in _reaching_pipelines(url):
        for role in ("annotator", "manager"):
            r = staff[role].post("/api/search/", {"run": run.pk, "text": "a person", "pipeline": pipeline},
                                 format="json")
            assert r.status_code == 400, (role, pipeline, r.content)
            assert r.json()["code"] == code and r.json()["message"].startswith(field), r.json()
    assert posts == []


def test_evaluations_experiments_and_training_carry_no_url_or_path(snapshots, staff, listener, var_dir, tmp_path):
    url, posts = listener
    run = finished_run(snapshots, Path(var_dir) / "nowhere")
    for pipeline, code, _ in _reaching_pipelines(url):
        r = staff["manager"].post("/api/evaluation-runs/", {"snapshot": snapshots["dev"].pk, "training_run": run.pk,
                                                            "pipeline": pipeline}, format="json")
        assert r.status_code == 400 and r.json()["code"] == code, r.content
        grid = {"preset": "vtrajembed-table3", "base": tiny_config(steps=2), "pipeline": pipeline}
        r = staff["manager"].post("/api/experiments/", {"snapshot": snapshots["train"].pk,
                                                        "eval_snapshot": snapshots["dev"].pk, "grid": grid},
                                  format="json")
        assert r.status_code == 400 and r.json()["code"] == code, r.content
    outside = tmp_path / "trajlab-x"
    for config, field in ((tiny_config(cache_dir=str(outside)), "config.cache_dir"),
                          (tiny_config(model={"aggregator": "hf_lm", "lm_path": "/etc"}), "config.model.lm_path"),
                          (tiny_config(model={"text": {"kind": "hf", "path": "/etc"}}), "config.model.text.path")):
        r = staff["manager"].post("/api/training-runs/", {"snapshot": snapshots["train"].pk, "model_kind": "vtrajembed",
                                                          "eval_snapshot": snapshots["dev"].pk, "config": config},
                                  format="json")
        assert r.status_code == 400 and r.json()["code"] == "location_in_request", r.content
        assert r.json()["extra"]["field"] == field
    r = staff["manager"].post("/api/evaluation-runs/", {"snapshot": snapshots["dev"].pk, "kind": "untrained",
                                                        "model_kind": "vtrajembed",
                                                        "config": {"model": {"lm_path": "/etc"}}}, format="json")
    assert r.status_code == 400 and r.json()["code"] == "location_in_request", r.content
    assert not outside.exists() and posts == []
    assert EvaluationRun.objects.count() == 0 and Experiment.objects.count() == 0
    assert TrainingRun.objects.count() == 1


def test_a_registered_backend_is_reached_by_name_and_recorded_by_name(snapshots, staff, trained_dirs, var_dir,
                                                                      listener, settings):
    url, posts = listener
    settings.TRAJLAB_BACKENDS = {"lab-vlm": {"backend": "openai", "label": "the lab's VLM",
                                             "settings": {"base_url": url, "model": "served", "timeout_s": 5}}}
    run = finished_run(snapshots, trained_dirs["vtrajembed"])
    pipeline = {"reranker": "pointwise", "shortlist": 2, "scorer": {"backend": "lab-vlm"}}
    r = staff["annotator"].post("/api/search/", {"run": run.pk, "text": "a person", "pipeline": pipeline},
                                format="json")
    assert r.status_code == 200, r.content
    assert posts and all(p["path"] == "/v1/chat/completions" for p in posts)
    out = r.json()
    assert out["pipeline"]["scorer"]["backend"] == "lab-vlm" and url not in json.dumps(out)
    # of a registered backend a request tunes only temperature and seed: the rest is the operator's
    for settings_, code in (({"temperature": 0.2}, None), ({"timeout_s": 9999}, "setting_not_allowed"),
                            ({"extra_body": {"n": 64}}, "setting_not_allowed"), ([1], "invalid_pipeline")):
        body = {"run": run.pk, "text": "a person", "pipeline": {**pipeline, "scorer": {"backend": "lab-vlm",
                                                                                      "settings": settings_}}}
        r = staff["annotator"].post("/api/search/", body, format="json")
        assert (r.status_code == 200) if code is None else (r.status_code == 400 and r.json()["code"] == code), \
            (settings_, r.content)
    # a request cannot point the registered name elsewhere: its settings never carry a location
    pipeline["scorer"]["settings"] = {"base_url": "http://127.0.0.3:9/v1"}
    r = staff["annotator"].post("/api/search/", {"run": run.pk, "text": "a person", "pipeline": pipeline},
                                format="json")
    assert r.status_code == 400 and r.json()["code"] == "location_in_request"
    # the list of backends: names for everyone, settings for managers
    listed = staff["annotator"].get("/api/backends/").json()
    assert [e["name"] for e in listed["registered"]] == ["lab-vlm"] and "settings" not in listed["registered"][0]
    assert listed["registered"][0]["uses"] == ["describer", "scorer", "writer"]
    assert "heuristic" in listed["embedded"]["scorer"] and "openai" not in listed["embedded"]["scorer"]
    managed = staff["manager"].get("/api/backends/").json()["registered"][0]
    assert managed["settings"]["base_url"] == url


@pytest.mark.parametrize("pipeline", [{"scorer": []}, {"scorer": "x"}, {"rewrite": None}, {"comparator": 3},
                                      {"scorer": {"backend": "openai", "settings": [1]}}])
def test_a_malformed_pipeline_stage_is_a_400(pipeline):
    from common.errors import ApplicationError
    from workers.pipelines import pipeline_resolve

    with pytest.raises(ApplicationError) as refused:
        pipeline_resolve(pipeline)
    assert refused.value.code == "invalid_pipeline" and refused.value.status_code == 400


def test_re_pointing_a_registered_name_keys_a_new_evaluation(settings):
    from workers.pipelines import pipeline_resolve, pipeline_sha256

    settings.TRAJLAB_BACKENDS = {"lab-vlm": {"backend": "openai", "settings": {"base_url": "http://a/v1", "model": "m"}}}
    _, record = pipeline_resolve({"reranker": "pointwise", "scorer": {"backend": "lab-vlm"}})
    first = pipeline_sha256(record)
    settings.TRAJLAB_BACKENDS = {"lab-vlm": {"backend": "openai", "settings": {"base_url": "http://b/v1", "model": "m"}}}
    assert pipeline_sha256(record) != first and "http" not in str(record)
    _, plain = pipeline_resolve({"reranker": "pointwise"})
    from models.retrievers.pipeline import RetrievalPipeline
    assert pipeline_sha256(plain) == RetrievalPipeline.from_dict(plain).sha256()


def test_a_bad_registry_stops_start_up_with_the_entry_named(settings):
    from django.core.exceptions import ImproperlyConfigured

    from common.registry import registered_backends

    for bad, words in (({"openai": {"backend": "openai"}}, "not an implementation's name"),
                       ({"x": {"backend": "openai", "path": "/m"}}, "either a backend"),
                       ({"x": {"backend": "openai", "url": "http://h"}}, "an object with backend"),
                       ([1], "JSON object")):
        settings.TRAJLAB_BACKENDS = bad
        with pytest.raises(ImproperlyConfigured, match=words):
            registered_backends()


def test_server_paths_are_shown_to_managers_only(snapshots, staff, trained_dirs):
    from tests.trajectories.factories import config_factory

    config_factory(backend="sam3", checkpoint_path="/models/sam3.pt",
                   tracker_settings={"bpe_path": "/models/bpe.txt.gz", "device": "cpu"})
    seen = {role: staff[role].get("/api/proposal-configs/").json()["results"][0] for role in staff}
    assert seen["manager"]["checkpoint_path"] == "/models/sam3.pt"
    assert seen["manager"]["tracker_settings"]["bpe_path"] == "/models/bpe.txt.gz"
    assert seen["annotator"]["checkpoint_path"] == "" and seen["annotator"]["tracker_settings"] == {"device": "cpu"}
    run = finished_run(snapshots, trained_dirs["vtrajembed"])
    for url in (f"/api/training-runs/{run.pk}/", "/api/training-runs/"):
        seen = {role: staff[role].get(url).json() for role in staff}
        rows = {role: (body["results"][0] if "results" in body else body) for role, body in seen.items()}
        assert rows["manager"]["out_dir"] == str(trained_dirs["vtrajembed"])
        assert rows["annotator"]["out_dir"] == ""


def test_the_built_backends_of_search_are_bounded(monkeypatch):
    """Settings a request varies cannot make one process build backends without end."""
    from workers import search as search_module

    monkeypatch.setattr(search_module, "_built", type(search_module._built)())
    built = []
    for i in range(3 * search_module.MAX_BACKENDS):
        search_module._cached("scorer", "heuristic", {"seed": i}, lambda b, s: built.append(s) or object())
    assert len(search_module._built) == search_module.MAX_BACKENDS and len(built) == 3 * search_module.MAX_BACKENDS
    search_module._cached("scorer", "heuristic", {"seed": 3 * search_module.MAX_BACKENDS - 1}, lambda b, s: 1 / 0)
