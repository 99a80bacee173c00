"""Server-side reach of the describer and the query writer (issue 16, finding 7; issue 27,
finding 1): a request never carries an endpoint, a model folder or a credential, and names an
implementation that reaches out only through the operator's registry (``TRAJLAB_BACKENDS``).
Refusals are 400s that name the field, before a run is recorded or anything is called or read;
runs record the registered name, never what it stands for."""
from __future__ import annotations

import pytest

from annotation.benchmark.backends import (
    build_describer,
    build_writer,
    describer_settings,
    writer_settings,
)
from annotation.models import DescriptionRun, GenerationRun
from common.errors import ApplicationError
from tests.annotation.conftest import frozen_pool

pytestmark = pytest.mark.django_db
BUILDERS = (build_describer, build_writer, describer_settings, writer_settings)


@pytest.mark.parametrize("url", ["http://169.254.169.254/latest/meta-data", "http://127.0.0.2:8000/v1",
                                 "http://127.0.0.1:8000/v1", "file:///etc/passwd"])
def test_an_endpoint_in_a_request_is_refused_whatever_its_host(url):
    for build in BUILDERS:
        with pytest.raises(ApplicationError) as refused:
            build({"name": "openai", "base_url": url, "model": "m"}, None)
        assert refused.value.code == "location_in_request" and refused.value.status_code == 400
        assert refused.value.extra["field"] == "backend.base_url" and "GET /api/backends/" in refused.value.message


def test_reaching_backends_need_an_entry_and_credentials_stay_with_the_operator():
    for build in BUILDERS:
        for backend, code in (({"name": "openai", "model": "m"}, "backend_not_registered"),
                              ({"name": "transformers"}, "backend_not_registered"),
                              ({"name": "transformers", "model_path": "/etc"}, "location_in_request"),
                              ({"name": "heuristic", "api_key_env": "DJANGO_SECRET_KEY"}, "location_in_request")):
            with pytest.raises(ApplicationError) as refused:
                build(backend, None)
            assert refused.value.code == code, (build.__name__, backend)


def test_a_registered_backend_is_built_from_its_entry_and_recorded_by_name(settings):
    settings.TRAJLAB_BACKENDS = {"lab-llm": {"backend": "openai", "settings": {
        "base_url": "http://vllm.internal:8000/v1", "model": "Qwen2.5-7B-Instruct", "api_key_env": "LAB_KEY"}}}
    adapter = build_writer({"name": "lab-llm", "temperature": 0.5}, None)
    assert adapter.writer.config.base_url == "http://vllm.internal:8000/v1"
    record = writer_settings({"name": "lab-llm", "temperature": 0.5}, None).backend
    assert record == {"name": "lab-llm", "temperature": 0.5}       # the rest is the operator's entry
    with pytest.raises(ApplicationError) as refused:                # which a request cannot override
        build_writer({"name": "lab-llm", "model": "another", "timeout_s": 1e9}, None)
    assert refused.value.code == "setting_not_allowed"
    assert build_writer(record, None).writer is not None  # a run rebuilds its backend from its record
    with pytest.raises(ApplicationError) as refused:  # the name cannot be pointed elsewhere
        build_writer({"name": "lab-llm", "base_url": "http://127.0.0.2:9/v1"}, None)
    assert refused.value.code == "location_in_request"


def test_the_api_refuses_runs_that_reach_out(reviewable_run, annotators, manager_client):
    pool = frozen_pool(reviewable_run, annotators, "dev")
    for url, model in (("description-runs", DescriptionRun), ("generation-runs", GenerationRun)):
        for backend, code in (({"name": "openai", "base_url": "http://169.254.169.254/v1", "model": "m"},
                               "location_in_request"),
                              ({"name": "transformers", "model_path": "/etc"}, "location_in_request"),
                              ({"name": "openai", "model": "m"}, "backend_not_registered")):
            r = manager_client.post(f"/api/{url}/", {"pools": [pool.pk], "backend": backend}, format="json")
            assert r.status_code == 400, r.content
            assert r.json()["code"] == code, r.content
        assert model.objects.count() == 0
