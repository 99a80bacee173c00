import io

import pytest
import yaml
from django.core.management import call_command


def test_openapi_schema_is_valid_without_warnings():
    out = io.StringIO()
    call_command("spectacular", "--validate", "--fail-on-warn", stdout=out)
    schema = yaml.safe_load(out.getvalue())
    paths = schema["paths"]
    for path in ["/api/videos/", "/api/videos/{video_id}/frames/{index}.jpg", "/api/proposal-runs/",
                 "/api/jobs/{job_id}/", "/api/splits/assign/", "/api/trajectories/{trajectory_id}/marked/{index}.jpg"]:
        assert path in paths, path
    assert "image/jpeg" in paths["/api/videos/{video_id}/frames/{index}.jpg"]["get"]["responses"]["200"]["content"]


@pytest.mark.django_db
def test_schema_and_docs_are_served(client):
    assert client.get("/api/schema/").status_code == 200
    docs = client.get("/api/docs/")
    assert docs.status_code == 200 and b"swagger" in docs.content.lower()
