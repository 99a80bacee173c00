"""A release folder read by its users' own libraries, not by ours: Hugging Face ``datasets`` loads
every table's config (row counts, typed features, the default config, streaming), pyarrow and
DuckDB read the Parquet files as they are (timestamps with a zone, structs, lists), mlcroissant
validates the Croissant file and loads every record set, and the datasheet's plots are PNGs listed
in ``SHA256SUMS``. The release is the small train split of ``test_release_bytes`` (awkward values
included). A folder of the first format still passes ``import_release --check-only``.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import duckdb
import mlcroissant as mlc
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from django.core.management import call_command

from annotation.releases.services.release_io.check import iter_records, verify_checksums
from annotation.releases.services.release_io.export import CHECKSUMS, FORMATS, release_write
from annotation.releases.services.release_io.hub import front_matter, hub_split
from annotation.releases.services.release_io.plots import PLOTS
from annotation.releases.services.release_io.schema import TABLE, TABLES
from annotation.releases.services.release_io.shapes import EVIDENCE, PREDICATES, conform
from annotation.releases.services.releases import release_import
from common.errors import ApplicationError
from tests.annotation.test_release_bytes import META, scope  # noqa: F401 (the fixture)

os.environ.setdefault("HF_HUB_OFFLINE", "1")     # a local folder: the loader must never need the network
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
import datasets

pytestmark = pytest.mark.django_db
PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture
def folder(scope, tmp_path):  # noqa: F811
    written = release_write(tmp_path / "release", meta=META, scope=scope)
    assert written.counts["relations"] > 0 and written.counts["queries"] > 0
    return tmp_path / "release"


def _load(folder: Path, cache: Path, *args, **kw):
    return datasets.load_dataset(str(folder), *args, cache_dir=str(cache), **kw)


def _card_metadata(folder: Path) -> dict:
    text = (folder / "README.md").read_text(encoding="utf-8")
    assert text.startswith("---\n")
    return yaml.safe_load(text.split("---\n", 2)[1])


def test_the_card_declares_a_config_per_table(folder):
    body = json.loads((folder / "release.json").read_text())
    meta = _card_metadata(folder)
    assert meta == front_matter(body)
    assert meta["configs"][0]["config_name"] == "benchmark" and meta["configs"][0]["default"]
    held = [t.name for t in TABLES if body["counts"][t.name]]
    assert [c["config_name"] for c in meta["configs"]] == ["benchmark", *(t for t in held if t != "benchmark")]
    assert len(held) > 15 and len(held) < len(TABLES)           # the empty ones have no config
    assert {c["data_files"][0]["split"] for c in meta["configs"]} == {"train"}
    assert hub_split(["train", "dev", "test"]) == "train_dev_test" and hub_split(["test"]) == "test"
    assert meta["license"] == "cc-by-4.0" and meta["task_categories"] and meta["size_categories"]
    assert meta["pretty_name"] == "bytes 1.0.0" and "benchmark" in meta["tags"]
    for info in meta["dataset_info"]:
        assert datasets.Features._from_yaml_list(info["features"]) == \
            datasets.Features.from_arrow_schema(TABLE[info["config_name"]].schema())
    card = (folder / "README.md").read_text(encoding="utf-8")
    for heading in ("## Motivation", "## Composition", "## Collection process", "## Annotation protocol",
                    "## How reliable the labels are", "## Uses and limits", "## Licences",
                    "## Maintenance and versioning", "## Citation", "### Types and encodings", "## Loading"):
        assert heading in card, heading
    assert "majority approval is a rule, not a guarantee" in card.lower() and "model-generated" in card


def test_datasets_loads_every_table_with_its_rows_and_types(folder, tmp_path):
    cache = tmp_path / "hf"
    counts = json.loads((folder / "release.json").read_text())["counts"]
    for table in TABLES:
        if not counts[table.name]:
            with pytest.raises(ValueError):              # no config: the library knows no such table
                _load(folder, cache, table.name, split="train")
            continue
        loaded = _load(folder, cache, table.name, split="train")
        assert loaded.num_rows == counts[table.name], table.name
        assert loaded.features == datasets.Features.from_arrow_schema(table.schema()), table.name
        records = list(iter_records(folder, table.name))
        for key in table.key:                    # the same records, in the same order
            assert loaded[key] == [r[key] for r in records], (table.name, key)
    relations = _load(folder, cache, "relations", split="train")
    assert relations.features["decided_at"] == datasets.Value("timestamp[us, tz=UTC]")
    assert relations.features["evidence"]["reviews"] == datasets.List(datasets.Value("int64"))
    assert relations.features["label"] == datasets.Value("int64")
    expected = [conform(r["evidence"], EVIDENCE) for r in iter_records(folder, "relations")]
    assert relations["evidence"] == expected
    queries = _load(folder, cache, "queries", split="train")
    assert queries["predicates"] == [conform(r["predicates"], PREDICATES) for r in iter_records(folder, "queries")]
    trajectories = _load(folder, cache, "trajectories", split="train")
    assert trajectories.features["boxes"] == datasets.List(datasets.List(datasets.Value("float32")))

    # the default config is the benchmark, never the MOT text files
    default = _load(folder, cache, split="all")                # the union of the card's splits
    assert default.features == datasets.Features.from_arrow_schema(TABLE["benchmark"].schema())
    assert default.num_rows == counts["benchmark"]


def test_datasets_streams_a_table(folder, tmp_path):
    streamed = list(_load(folder, tmp_path / "hf", "relations", split="train", streaming=True))
    records = list(iter_records(folder, "relations"))
    assert len(streamed) == len(records)
    assert [(r["query_id"], r["trajectory_id"], r["label"]) for r in streamed] == \
        [(r["query_id"], r["trajectory_id"], r["label"]) for r in records]
    assert streamed[0]["decided_at"].tzinfo is not None


def test_pyarrow_and_duckdb_read_the_parquet_files_as_they_are(folder):
    counts = json.loads((folder / "release.json").read_text())["counts"]
    for table in TABLES:
        path = folder / "data" / f"{table.name}.parquet"
        assert pq.read_schema(path) == table.schema(), table.name
        assert pq.read_metadata(path).num_rows == counts[table.name]
        assert duckdb.sql(f"SELECT count(*) FROM read_parquet('{path}')").fetchall()[0][0] == counts[table.name]
    relations = folder / "data" / "relations.parquet"
    schema = pq.read_schema(relations)
    assert schema.field("decided_at").type == pa.timestamp("us", tz="UTC")
    assert pa.types.is_struct(schema.field("evidence").type) and schema.field("query_id").type == pa.int64()
    types = dict(duckdb.sql(f"SELECT column_name, column_type FROM (DESCRIBE SELECT * FROM '{relations}')").fetchall())
    assert types["decided_at"] == "TIMESTAMP WITH TIME ZONE" and types["query_id"] == "BIGINT"
    assert types["evidence"].startswith("STRUCT(") and "reviews BIGINT[]" in types["evidence"]
    within = [r for r in iter_records(folder, "relations") if "reviews" in (r["evidence"] or {})]
    got = duckdb.sql(f"SELECT query_id, trajectory_id, evidence.reviews FROM '{relations}' "
                     "WHERE evidence.reviews IS NOT NULL ORDER BY query_id, trajectory_id").fetchall()
    assert got == [(r["query_id"], r["trajectory_id"], r["evidence"]["reviews"]) for r in within]
    queries = folder / "data" / "queries.parquet"
    assert duckdb.sql(f"SELECT typeof(predicates) FROM '{queries}' LIMIT 1").fetchall()[0][0].startswith("STRUCT(")


def test_croissant_validates_and_loads_every_record_set(folder):
    dataset = mlc.Dataset(jsonld=folder / "croissant.json")
    assert not dataset.metadata.ctx.issues.errors, dataset.metadata.ctx.issues.report()
    counts = json.loads((folder / "release.json").read_text())["counts"]
    for table in TABLES:
        records = list(dataset.records(record_set=table.name))
        assert len(records) == counts[table.name], table.name
        if records:
            key = f"{table.name}/{table.key[0]}"
            assert [r[key] for r in records] == [r[table.key[0]] for r in iter_records(folder, table.name)]
    relation = next(iter(dataset.records(record_set="relations")))
    assert relation["relations/decided_at"].tzinfo is not None
    doc = json.loads((folder / "croissant.json").read_text())
    fields = {f["name"]: f for rs in doc["recordSet"] if rs["name"] == "relations" for f in rs["field"]}
    assert fields["decided_at"]["dataType"] == "sc:DateTime"
    assert {f["name"] for f in fields["evidence"]["subField"]} == {f.name for f in EVIDENCE}


def test_the_plots_are_pngs_listed_in_the_checksums(folder):
    listed = (folder / CHECKSUMS).read_text().splitlines()
    for path in PLOTS:
        data = (folder / path).read_bytes()
        assert data.startswith(PNG) and len(data) > 1000, path
        assert f"{hashlib.sha256(data).hexdigest()}  {path}" in listed
        assert f"]({path})" in (folder / "README.md").read_text(encoding="utf-8")
    assert verify_checksums(folder) == []


def _set_format(folder: Path, fmt: str) -> None:
    """``release.json`` says ``fmt``, and ``SHA256SUMS`` lists its new hash."""
    body = json.loads((folder / "release.json").read_text())
    body["format"] = fmt
    (folder / "release.json").write_text(json.dumps(body, sort_keys=True, indent=2) + "\n")
    sums = dict(reversed(line.split("  ", 1)) for line in (folder / CHECKSUMS).read_text().splitlines())
    sums["release.json"] = hashlib.sha256((folder / "release.json").read_bytes()).hexdigest()
    (folder / CHECKSUMS).write_text("".join(f"{sha}  {path}\n" for path, sha in sorted(sums.items())))


def test_a_release_of_the_first_format_still_verifies(folder, tmp_path):
    assert json.loads((folder / "release.json").read_text())["format"] == FORMATS[-1] == "trajlab-release/2"
    old = tmp_path / "old"
    shutil.copytree(folder, old)
    _set_format(old, FORMATS[0])
    call_command("import_release", str(old), "--check-only")
    with pytest.raises(ApplicationError) as known:          # the format is read; this instance is not fresh
        release_import(path=old)
    assert known.value.code != "unknown_format"
    _set_format(old, "trajlab-release/0")
    with pytest.raises(ApplicationError) as unknown:
        release_import(path=old)
    assert unknown.value.code == "unknown_format"
