"""The review stage registry: one declaration per stage, read by the database's label check and
served to the UI by ``GET /api/review/stages/``."""
from __future__ import annotations

import pytest

from annotation.curation.labels import BY_STAGE
from annotation.curation.stages import STAGE_NAMES, STAGES, stage_get
from annotation.models import ALL_LABELS, WorkItem
from common.errors import ApplicationError


def test_the_registry_lists_every_stage_once_in_pipeline_order():
    assert STAGE_NAMES == ("usability", "identity", "description", "relation", "pair")
    assert set(STAGE_NAMES) == set(WorkItem.Stage.values)
    for stage in STAGES:
        assert set(stage.decisive) <= set(stage.label_values), stage.name
        assert 1 <= stage.required <= stage.panel, stage.name


def test_the_database_accepts_exactly_the_declared_labels():
    declared = {value for stage in STAGES for value in stage.label_values}
    assert set(ALL_LABELS) == declared


def test_an_unknown_stage_names_the_valid_ones():
    with pytest.raises(ApplicationError) as err:
        stage_get("relations")
    assert err.value.code == "invalid_stage"
    assert "usability, identity, description, relation, pair" in err.value.message


def test_items_read_their_labels_from_their_stage():
    assert WorkItem(stage="pair").labels == ("match", "mismatch", "uncertain")
    assert WorkItem(stage="description").decisive == ("usable", "unusable")
    for stage in STAGES:
        item = WorkItem(stage=stage.name)
        assert (item.labels, item.decisive) == (stage.label_values, stage.decisive), stage.name
        assert stage.labels == BY_STAGE[stage.name].labels, stage.name


@pytest.mark.django_db
def test_the_stage_table_for_the_ui(client_for, make_user, client):
    assert client.get("/api/review/stages/").status_code in (401, 403)
    body = client_for(make_user("auditor", username="aud")).get("/api/review/stages/").json()
    assert [s["stage"] for s in body] == list(STAGE_NAMES)
    usability = body[0]
    assert usability == {
        "stage": "usability",
        "labels": [{"value": "usable", "text": "Usable"}, {"value": "unusable", "text": "Unusable"},
                   {"value": "uncertain", "text": "Uncertain"}],
        "decisive": ["usable", "unusable"],
        "reasons": ["switches to another object", "box drifts off the object", "box much too large or small",
                    "not the stated category", "too short or mostly occluded"],
        "panel": 3, "required": 2}
    relation = body[3]
    assert (relation["labels"], relation["reasons"], relation["panel"], relation["required"]) == (
        [{"value": "reviewed", "text": "Send the row's labels"}], [], 1, 1)
    assert body[2]["labels"][1] == {"value": "usable_after_minor_correction", "text": "Usable after minor correction"}


def test_the_schema_declares_the_stage_table():
    from drf_spectacular.generators import SchemaGenerator

    schema = SchemaGenerator().get_schema(request=None, public=True)
    response = schema["paths"]["/api/review/stages/"]["get"]["responses"]["200"]
    assert response["content"]["application/json"]["schema"]["items"]["$ref"].endswith("/StageOutput")
    assert set(schema["components"]["schemas"]["StageOutput"]["required"]) == {
        "stage", "labels", "decisive", "reasons", "panel", "required"}
