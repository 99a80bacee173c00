"""A release folder read by its users' own libraries, not by ours: Hugging Face ``datasets`` loads
every table's config (row counts, typed features, the default config, streaming), pyarrow and
DuckDB read the Parquet files as they are (timestamps with a zone, structs, lists), mlcroissant
validates the Croissant file and loads every record set, and the datasheet's plots are PNGs listed
in ``SHA256SUMS``. The release is the small release of three splits of ``test_release_bytes`` (awkward
values included): every table is read split by split. Folders of the earlier formats (one Parquet
file per table) still pass ``import_release --check-only``.
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
from annotation.releases.services.release_io.hub import front_matter
from annotation.releases.services.release_io.plots import PLOTS
from annotation.releases.services.release_io.schema import TABLE, TABLES
from annotation.releases.services.release_io.shapes import EVIDENCE, PREDICATES, conform
from annotation.releases.services.release_io.splits import SPLIT_BY
from annotation.releases.services.releases import _written_from_folder, release_import
from common.errors import ApplicationError
from tests.annotation.test_release_bytes import SPLITS, build_scope, meta_of

os.environ.setdefault("HF_HUB_OFFLINE", "1")     # a local folder: the loader must never need the network
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
import datasets

pytestmark = pytest.mark.django_db
PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture
def folder(db, tmp_path):
    scope = build_scope(SPLITS)
    written = release_write(tmp_path / "release", meta=meta_of(scope), scope=scope)
    assert written.counts["relations"] > 0 and written.counts["queries"] > 0
    return tmp_path / "release"


def _split_rows(folder: Path) -> dict[str, dict[str, list[dict]]]:
    """Per table and split, the JSON Lines records of that split's rows (every split's for a shared
    table), by the split of the video, query or review item each row belongs to."""
    split_of: dict[str, dict[int, str]] = {}
    out: dict[str, dict[str, list[dict]]] = {}
    for table in TABLES:
        records = list(iter_records(folder, table.name))
        by = SPLIT_BY.get(table.name)
        if by is None:
            out[table.name] = {split: records for split in SPLITS}
            continue
        splits = [r[by.column] if not by.table else split_of[by.table][r[by.column]] for r in records]
        if "id" in table.names:
            split_of[table.name] = {r["id"]: s for r, s in zip(records, splits)}
        out[table.name] = {split: [r for r, s in zip(records, splits) if s == split] for split in SPLITS}
    return out


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
    rows = _split_rows(folder)
    for config in meta["configs"]:
        name = config["config_name"]
        declared = [f["split"] for f in config["data_files"]]
        assert declared == [s for s in SPLITS if rows[name][s]], name        # every split with rows, in order
        paths = {f["path"] for f in config["data_files"]}
        assert paths == ({f"data/{name}/shared.parquet"} if name not in SPLIT_BY else
                         {f"data/{name}/{s}.parquet" for s in declared}), name
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


def test_datasets_loads_every_table_split_by_split_with_its_rows_and_types(folder, tmp_path):
    cache = tmp_path / "hf"
    counts = json.loads((folder / "release.json").read_text())["counts"]
    rows = _split_rows(folder)
    loaded_splits = set()
    for table in TABLES:
        if not counts[table.name]:
            with pytest.raises(ValueError):              # no config: the library knows no such table
                _load(folder, cache, table.name, split="train")
            continue
        for split in SPLITS:
            records = rows[table.name][split]
            if not records:                              # not declared: the library refuses an empty split
                with pytest.raises(ValueError, match="split"):
                    _load(folder, cache, table.name, split=split)
                continue
            loaded = _load(folder, cache, table.name, split=split)
            loaded_splits.add(split)
            assert loaded.num_rows == len(records), (table.name, split)
            assert loaded.features == datasets.Features.from_arrow_schema(table.schema()), table.name
            for key in table.key:                # exactly the split's records, in the same order
                assert loaded[key] == [r[key] for r in records], (table.name, split, key)
    assert loaded_splits == set(SPLITS)
    assert sum(len(rows["relations"][s]) for s in SPLITS) == counts["relations"]
    test = _load(folder, cache, "benchmark", split="test")
    assert set(test["split"]) == {"test"} and test.num_rows == len(rows["benchmark"]["test"]) > 0
    relations = _load(folder, cache, "relations", split="train")
    assert relations.features["decided_at"] == datasets.Value("timestamp[us, tz=UTC]")
    assert relations.features["evidence"]["reviews"] == datasets.List(datasets.Value("int64"))
    assert relations.features["label"] == datasets.Value("int64")
    expected = [conform(r["evidence"], EVIDENCE) for r in rows["relations"]["train"]]
    assert relations["evidence"] == expected
    queries = _load(folder, cache, "queries", split="train")
    assert queries["predicates"] == [conform(r["predicates"], PREDICATES) for r in rows["queries"]["train"]]
    trajectories = _load(folder, cache, "trajectories", split="train")
    assert trajectories.features["boxes"] == datasets.List(datasets.List(datasets.Value("float32")))

    # the default config is the benchmark, never the MOT text files
    default = _load(folder, cache, split="all")                # the union of the card's splits
    assert default.features == datasets.Features.from_arrow_schema(TABLE["benchmark"].schema())
    assert default.num_rows == counts["benchmark"]


def test_datasets_streams_a_table(folder, tmp_path):
    streamed = list(_load(folder, tmp_path / "hf", "relations", split="dev", streaming=True))
    records = _split_rows(folder)["relations"]["dev"]
    assert records
    assert len(streamed) == len(records)
    assert [(r["query_id"], r["trajectory_id"], r["label"]) for r in streamed] == \
        [(r["query_id"], r["trajectory_id"], r["label"]) for r in records]
    assert streamed[0]["decided_at"].tzinfo is not None


def test_pyarrow_and_duckdb_read_the_parquet_files_as_they_are(folder):
    body = json.loads((folder / "release.json").read_text())
    rows = _split_rows(folder)
    for table in TABLES:
        files = body["tables"][table.name]["files"]["parquet"]
        assert set(files) == ({"shared"} if table.name not in SPLIT_BY and body["counts"][table.name] else
                              {s for s in SPLITS if rows[table.name][s]}), table.name
        for part, path in files.items():
            n = len(rows[table.name]["train" if part == "shared" else part])
            assert body["tables"][table.name]["split_rows"][part] == n
            assert pq.read_schema(folder / path) == table.schema(), table.name
            assert pq.read_metadata(folder / path).num_rows == n
            assert duckdb.sql(f"SELECT count(*) FROM read_parquet('{folder / path}')").fetchall()[0][0] == n
        if table.name in SPLIT_BY and files:         # a table's every split at once
            everything = f"{folder}/data/{table.name}/*.parquet"
            assert duckdb.sql(f"SELECT count(*) FROM '{everything}'").fetchall()[0][0] == body["counts"][table.name]
    relations = f"{folder}/data/relations/*.parquet"
    schema = pq.read_schema(folder / "data" / "relations" / "train.parquet")
    assert schema.field("decided_at").type == pa.timestamp("us", tz="UTC")
    assert pa.types.is_struct(schema.field("evidence").type) and schema.field("query_id").type == pa.int64()
    types = dict(duckdb.sql(f"SELECT column_name, column_type FROM (DESCRIBE SELECT * FROM '{relations}')").fetchall())
    assert types["decided_at"] == "TIMESTAMP WITH TIME ZONE" and types["query_id"] == "BIGINT"
    assert types["evidence"].startswith("STRUCT(") and "reviews BIGINT[]" in types["evidence"]
    within = [r for r in iter_records(folder, "relations") if "reviews" in (r["evidence"] or {})]
    got = duckdb.sql(f"SELECT query_id, trajectory_id, evidence.reviews FROM '{relations}' "
                     "WHERE evidence.reviews IS NOT NULL ORDER BY query_id, trajectory_id").fetchall()
    assert got == [(r["query_id"], r["trajectory_id"], r["evidence"]["reviews"]) for r in within]
    queries = f"{folder}/data/queries/*.parquet"
    assert duckdb.sql(f"SELECT typeof(predicates) FROM '{queries}' LIMIT 1").fetchall()[0][0].startswith("STRUCT(")


def test_croissant_validates_and_loads_every_record_set(folder):
    dataset = mlc.Dataset(jsonld=folder / "croissant.json")
    assert not dataset.metadata.ctx.issues.errors, dataset.metadata.ctx.issues.report()
    counts = json.loads((folder / "release.json").read_text())["counts"]
    declared = {rs["name"] for rs in json.loads((folder / "croissant.json").read_text())["recordSet"]}
    assert declared == {t.name for t in TABLES if counts[t.name]}         # a table without rows has no files
    for table in TABLES:
        if table.name not in declared:
            continue
        records = list(dataset.records(record_set=table.name))
        assert len(records) == counts[table.name], table.name
        key = f"{table.name}/{table.key[0]}"
        assert sorted(r[key] for r in records) == sorted(r[table.key[0]] for r in iter_records(folder, table.name))
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


def _as_one_file_per_table(folder: Path) -> None:
    """The layout of formats 1 and 2: each table's Parquet rows in one ``data/<table>.parquet``."""
    body = json.loads((folder / "release.json").read_text())
    for name, meta in body["tables"].items():
        parts = [folder / path for path in meta["files"]["parquet"].values()]
        table = pa.concat_tables([pq.read_table(p) for p in parts]) if parts else TABLE[name].schema().empty_table()
        pq.write_table(table, folder / "data" / f"{name}.parquet")
        shutil.rmtree(folder / "data" / name, ignore_errors=True)
        meta["files"]["parquet"] = f"data/{name}.parquet"
        del meta["split_rows"]
    (folder / "release.json").write_text(json.dumps(body, sort_keys=True, indent=2) + "\n")
    files = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())
    (folder / CHECKSUMS).write_text("".join(f"{hashlib.sha256((folder / p).read_bytes()).hexdigest()}  {p}\n"
                                            for p in files if p != CHECKSUMS))


@pytest.mark.parametrize("fmt", FORMATS[:-1])
def test_a_release_of_an_earlier_format_still_verifies(folder, tmp_path, fmt):
    assert json.loads((folder / "release.json").read_text())["format"] == FORMATS[-1] == "trajlab-release/3"
    old = tmp_path / "old"
    shutil.copytree(folder, old)
    _as_one_file_per_table(old)
    _set_format(old, fmt)
    call_command("import_release", str(old), "--check-only")
    with pytest.raises(ApplicationError) as known:          # the format is read; this instance is not fresh
        release_import(path=old)
    assert known.value.code != "unknown_format"
    listed = {f.path: f.rows for f in _written_from_folder(old, json.loads((old / "release.json").read_text())).files}
    assert listed["data/relations.parquet"] == listed["data/relations.jsonl"] > 0
    _set_format(old, "trajlab-release/0")
    with pytest.raises(ApplicationError) as unknown:
        release_import(path=old)
    assert unknown.value.code == "unknown_format"
