"""Server-side reach of the model backends (issue 16, finding 7): an OpenAI-compatible
``base_url`` off ``TRAJLAB_ENDPOINT_ALLOWLIST`` (default: loopback hosts) and a ``model_path``
outside ``TRAJLAB_MODEL_ROOTS`` are refused with 400 and the reason, through the service and the
API, before a run is recorded or anything is called or read."""
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


@pytest.mark.parametrize("url", ["http://169.254.169.254/latest/meta-data", "https://api.example.com/v1",
                                 "http://10.0.0.5:8000/v1", "file:///etc/passwd", "http://127.0.0.1.example.com/v1"])
def test_an_endpoint_off_the_allow_list_is_refused(url):
    for build in (build_describer, build_writer, describer_settings, writer_settings):
        with pytest.raises(ApplicationError) as refused:
            build({"name": "openai", "base_url": url, "model": "m"}, None)
        assert refused.value.code == "endpoint_not_allowed" and refused.value.status_code == 400
        assert url in refused.value.message and "TRAJLAB_ENDPOINT_ALLOWLIST" in refused.value.message


def test_loopback_and_listed_endpoints_are_allowed(settings):
    for url in ("http://127.0.0.1:8000/v1", "http://localhost:9/v1", "http://[::1]:8000/v1"):
        assert build_writer({"name": "openai", "base_url": url, "model": "m"}, None).writer is not None
    settings.TRAJLAB_ENDPOINT_ALLOWLIST = ["vllm.internal:8000"]
    assert build_describer({"name": "openai", "base_url": "http://vllm.internal:8000/v1", "model": "m"}, None)
    for url in ("http://vllm.internal:9000/v1", "http://127.0.0.1:8000/v1"):
        with pytest.raises(ApplicationError, match="outside the allowed endpoints"):
            build_describer({"name": "openai", "base_url": url, "model": "m"}, None)


def test_a_model_folder_outside_the_model_roots_is_refused(settings, tmp_path):
    settings.TRAJLAB_MODEL_ROOTS = [str(tmp_path)]
    for build in (build_describer, build_writer):
        with pytest.raises(ApplicationError) as refused:
            build({"name": "transformers", "model_path": "/etc"}, None)
        assert refused.value.code == "path_outside_roots" and "model_path" in refused.value.message


def test_the_api_refuses_runs_that_reach_out(reviewable_run, annotators, manager_client):
    pool = frozen_pool(reviewable_run, annotators, "dev")
    for url, model in (("description-runs", DescriptionRun), ("generation-runs", GenerationRun)):
        r = manager_client.post(f"/api/{url}/", {"pools": [pool.pk], "backend": {
            "name": "openai", "base_url": "http://169.254.169.254/v1", "model": "m"}}, format="json")
        assert r.status_code == 400, r.content
        assert r.json()["code"] == "endpoint_not_allowed" and "169.254.169.254" in r.json()["message"]
        r = manager_client.post(f"/api/{url}/", {"pools": [pool.pk], "backend": {
            "name": "transformers", "model_path": "/etc"}}, format="json")
        assert r.status_code == 400 and r.json()["code"] == "path_outside_roots", r.content
        assert model.objects.count() == 0
