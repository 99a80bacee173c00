"""The dataset card (``README.md``) and the Croissant metadata (``croissant.json``) of a release.

Both are written from ``release.json``'s content, the statistics and the construction
configuration, so they say exactly what the folder holds. The Croissant file follows Croissant 1.0:
one ``FileObject`` per data file (with its SHA-256), one ``FileSet`` per table (its Parquet files, one
per split) and one ``RecordSet`` per table read from it.
"""
from __future__ import annotations

import pyarrow as pa

from annotation.releases.services.release_io.agreement_card import agreement_section
from annotation.releases.services.release_io.datasheet import (
    collection,
    composition,
    licences,
    maintenance,
    motivation,
    protocol,
    uses,
)
from annotation.releases.services.release_io.evaluation_card import evaluation_section
from annotation.releases.services.release_io.hub import front_matter_text
from annotation.releases.services.release_io.schema import TABLE, TABLES
from annotation.smoke_test import card_note_lines

CROISSANT_CONTEXT = {
    "@language": "en", "@vocab": "https://schema.org/", "citeAs": "cr:citeAs", "column": "cr:column",
    "conformsTo": "dct:conformsTo", "cr": "http://mlcommons.org/croissant/", "rai": "http://mlcommons.org/croissant/RAI/",
    "data": {"@id": "cr:data", "@type": "@json"}, "dataType": {"@id": "cr:dataType", "@type": "@vocab"},
    "dct": "http://purl.org/dc/terms/", "equivalentProperty": "cr:equivalentProperty",
    "examples": {"@id": "cr:examples", "@type": "@json"}, "extract": "cr:extract", "field": "cr:field",
    "fileProperty": "cr:fileProperty", "fileObject": "cr:fileObject", "fileSet": "cr:fileSet", "format": "cr:format",
    "includes": "cr:includes", "isLiveDataset": "cr:isLiveDataset", "jsonPath": "cr:jsonPath", "key": "cr:key",
    "md5": "cr:md5", "parentField": "cr:parentField", "path": "cr:path", "recordSet": "cr:recordSet",
    "references": "cr:references", "regex": "cr:regex", "repeated": "cr:repeated", "replace": "cr:replace",
    "samplingRate": "cr:samplingRate", "sc": "https://schema.org/", "separator": "cr:separator",
    "source": "cr:source", "subField": "cr:subField", "transform": "cr:transform",
}
LICENSES = {"CC-BY-4.0": "https://creativecommons.org/licenses/by/4.0/",
            "CC-BY-SA-4.0": "https://creativecommons.org/licenses/by-sa/4.0/",
            "CC-BY-NC-4.0": "https://creativecommons.org/licenses/by-nc/4.0/",
            "CC0-1.0": "https://creativecommons.org/publicdomain/zero/1.0/"}


def _file_id(path: str) -> str:
    return path.replace("/", "-").replace(".", "-")


def _citation(body: dict) -> str:
    key = f"{body['name']}-{body['version']}".replace(".", "-")
    return (f"@misc{{{key}, title={{{body['name']} {body['version']}}}, note={{Text-to-trajectory retrieval "
            f"benchmark release, splits {', '.join(body['splits'])}}}, year={{{body['created_at'][:4]}}}}}")


def _field(field_id: str, name: str, arrow_type: pa.DataType, source: dict, path: list[str]) -> dict:
    """The Croissant field of a Parquet column (``path`` empty) or of a part of one: a list is a
    repeated field of its items' type, a struct a field whose sub-fields take their values with a
    ``jsonPath`` transform per level (applied to each item of a list)."""
    out = {"@type": "cr:Field", "@id": field_id, "name": name}
    repeated = pa.types.is_list(arrow_type)
    item = arrow_type.value_type if repeated else arrow_type
    if pa.types.is_struct(item):
        out["subField"] = [_field(f"{field_id}/{f.name}", f.name, f.type, source, [*path, f.name]) for f in item]
    else:
        while pa.types.is_list(item):                # boxes: a list of [x1, y1, x2, y2]
            item = item.value_type
        out["dataType"] = ("sc:DateTime" if pa.types.is_timestamp(item) else
                           "sc:Integer" if pa.types.is_integer(item) else
                           "sc:Float" if pa.types.is_floating(item) else
                           "sc:Boolean" if pa.types.is_boolean(item) else "sc:Text")
    out["source"] = {**source, "transform": [{"jsonPath": p} for p in path]} if path else source
    if repeated:
        out["repeated"] = True
    return out


def croissant_metadata(body: dict, hashes: dict[str, str], sizes: dict[str, int]) -> dict:
    """Croissant 1.0 JSON-LD of the release: its data files and one record set per table."""
    distribution = [{"@type": "cr:FileObject", "@id": _file_id(path), "name": path, "contentUrl": path,
                     "encodingFormat": "application/x-parquet" if path.endswith(".parquet") else "application/jsonlines",
                     "sha256": sha, "contentSize": f"{sizes[path]} B"} for path, sha in sorted(hashes.items())]
    record_sets = []
    for name, meta in body["tables"].items():
        if not meta["files"]["parquet"]:             # no rows, no file: nothing to read
            continue
        table = TABLE[name]
        source = f"parquet-{name}"
        distribution.append({"@type": "cr:FileSet", "@id": source, "name": source,
                             "description": f"the {name} table's Parquet files, one per split",
                             "encodingFormat": "application/x-parquet", "includes": f"data/{name}/*.parquet"})
        fields = []
        for c, arrow_field in zip(table.columns, table.schema()):
            # References are named in the description, not as cr:references: a Croissant reader joins
            # along those, and the self-references (revisions, pool versions) would form cycles.
            described = c.doc or f"{c.name} ({c.kind})"
            if c.ref:
                target, _, column = c.ref.partition(".")
                described += f"; refers to {target}.{column or TABLE[target].key[0]}"
            entry = _field(f"{name}/{c.name}", c.name, arrow_field.type, {"fileSet": {"@id": source},
                                                                          "extract": {"column": c.name}}, [])
            fields.append({**entry, "description": described})
        record_set = {"@type": "cr:RecordSet", "@id": name, "name": name, "description": table.doc, "field": fields}
        record_set["key"] = [{"@id": f"{name}/{k}"} for k in table.key] if len(table.key) > 1 \
            else {"@id": f"{name}/{table.key[0]}"}
        record_sets.append(record_set)
    parent = body.get("parent") or {}
    doc = {
        "@context": CROISSANT_CONTEXT, "@type": "sc:Dataset", "name": body["name"],
        "description": body["description"] or f"Text-to-trajectory retrieval benchmark, splits "
                                               f"{', '.join(body['splits'])}.",
        "conformsTo": "http://mlcommons.org/croissant/1.0", "version": body["version"],
        "license": LICENSES.get(body["license"], body["license"]), "datePublished": body["created_at"],
        "citeAs": _citation(body),
        "keywords": ["text-to-trajectory retrieval", "video", "multi-object tracking", "benchmark",
                     *[f"split:{s}" for s in body["splits"]]],
        "distribution": distribution, "recordSet": record_sets,
    }
    if parent:
        doc["isBasedOn"] = f"{parent['name']} {parent['version']} (SHA256SUMS {parent['manifest_sha256']})"
    return doc


# -- dataset card ----------------------------------------------------------------------------------
def _pct(x) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def _num(x, digits: int = 3) -> str:
    return "n/a" if x is None else (f"{x:.{digits}f}" if isinstance(x, float) else str(x))


def _benchmark_lines(stats: dict) -> list[str]:
    lines = ["| split | label | source | stratum | pseudo | relations |", "|---|---|---|---|---|---|"]
    for row in stats["relations"]:
        lines.append(f"| {row['split']} | {row['label']} | {row['source']} | {row['stratum']} | "
                     f"{'yes' if row['pseudo'] else 'no'} | {row['n']} |")
    for split, report in stats["completeness"].items():
        lines.append("")
        lines.append(f"- {split}: {report['queries']} queries × {report['trajectories']} candidates = "
                     f"{report['needed']} relations needed by Traj2T and OCVR, {report['binary']} binary "
                     f"({'complete' if report['complete'] else 'incomplete'}).")
    return lines


def _audit_lines(stats: dict) -> list[str]:
    if not stats["audits"]:
        return ["No audit of these splits was recorded before this release: the residual error rate is not "
                "estimated."]
    lines = ["| audit | split | kind | stratum | judged / sampled | errors | error rate | exact 95% interval | "
             "errors by type |", "|---|---|---|---|---|---|---|---|---|"]
    for audit in stats["audits"]:
        for kind, strata in audit["by_kind"].items():
            for stratum, s in strata.items():
                low, high = s["ci95"]
                types = ", ".join(f"{k} {v}" for k, v in s["errors_by_type"].items()) or "-"
                lines.append(f"| {audit['audit']} | {audit['split']} | {kind} | {stratum} | {s['judged']} / "
                             f"{s['sampled']} | {s['errors']} | {_pct(s['error_rate'])} | {_pct(low)}–{_pct(high)} | "
                             f"{types} |")
    lines.append("")
    lines.append("The random stratum is a uniform sample of the accepted records: its error rate estimates the "
                 "residual error rate of all of them. The difficult stratum (disputed, adjudicated, low agreement) "
                 "is reported apart and says nothing about the population's rate.")
    return lines


def _loading(body: dict) -> list[str]:
    splits = body["splits"]
    split = splits[-1]
    return ["## Loading", "",
            "This README is a Hugging Face dataset card: its front matter declares one config per table "
            f"(`benchmark` by default), each with one Parquet file per split ({', '.join(f'`{s}`' for s in splits)}"
            "). Tables whose rows serve every split (reviewers, sources, tracker configurations, describer and "
            "writer runs, pseudo-label rules) list their one file under each split; `split='all'` reads the "
            "union of a config's splits. A table without rows, or a split where a table has none, is not "
            "declared.", "",
            "```python", "from datasets import load_dataset", "",
            f"benchmark = load_dataset('path/to/release', split='{split}')            # the default config",
            f"relations = load_dataset('path/to/release', 'relations', split='{split}')",
            "gold = relations.filter(lambda r: r['label'] >= 0 and not r['pseudo'])",
            f"stream = load_dataset('path/to/release', 'votes', split='{split}', streaming=True)", "```", "",
            "The Parquet files read as they are with pyarrow, pandas, Polars or DuckDB:", "",
            "```python", "import duckdb, pyarrow.parquet as pq",
            "queries = pq.read_table('data/benchmark')                # every split's file",
            "duckdb.sql(\"SELECT split, count(*) FROM 'data/relations/*.parquet' r JOIN 'data/benchmark/*.parquet' b "
            "ON r.query_id = b.query_id WHERE r.label >= 0 AND NOT r.pseudo GROUP BY split\")", "```", ""]


def _types() -> list[str]:
    shaped = [f"`{t.name}.{c.name}`" for t in TABLES for c in t.columns if c.shape is not None]
    text = [f"`{t.name}.{c.name}`" for t in TABLES for c in t.columns if c.kind == "json" and c.shape is None]
    return ["### Types and encodings", "",
            "- Ids are int64 and name records of the table their column refers to (`release.json` lists every "
            "column with its type and reference).",
            "- Times are `timestamp[us, tz=UTC]` in Parquet and ISO 8601 text in UTC in JSON Lines.",
            "- Labels have one encoding everywhere (`relations.label`, `relation_judgments.label`, proposals' "
            "`label`): `1` match, `0` mismatch, `-1` unknown (⊥), as int64. Vote labels (`votes.label`) are the "
            "stage's own words (`usable`, `same`, `match`, ...).",
            "- Frames are int32 lists, boxes lists of `[x1, y1, x2, y2]` float32 in original pixels.",
            f"- Structured columns are Arrow structs and lists in Parquet: {', '.join(shaped)}. Their Parquet form "
            "keeps the declared fields (a key no field declares is left out there, never in JSON Lines).",
            f"- Free-form JSON (keys vary with the backend or the stage that wrote them) stays canonical JSON text: "
            f"{', '.join(text)}.",
            "- JSON Lines (`data/<table>.jsonl`) holds every record whole, keys sorted, for diffing.", ""]


def dataset_card(body: dict, stats: dict, config: dict) -> str:
    """The README of a release: a Hugging Face dataset card (front matter with a config per table) and
    a datasheet (what it holds, why, how it was built and reviewed, how reliable it is, its uses and
    limits, licences, maintenance, how to load and cite it)."""
    parent = body.get("parent")
    out = [front_matter_text(body), f"# {body['name']} {body['version']}", ""]
    out += [body["description"] or "A human-verified text-to-trajectory retrieval benchmark.", ""]
    out += [f"- Splits: {', '.join(body['splits'])}",
            f"- Published: {body['created_at']}",
            f"- Parent release: {parent['name']} {parent['version']} (SHA256SUMS {parent['manifest_sha256']})"
            if parent else "- Parent release: none (first release)",
            f"- License: {body['license']}",
            "- Video files included: " + ("yes (media/)" if body["media_included"]
                                          else "no (see videos.path and content_sha256)"),
            "- Integrity: every file's SHA-256 is in `SHA256SUMS` (`sha256sum -c SHA256SUMS`); the release is "
            "named by the SHA-256 of that file.", ""]
    out += card_note_lines(config)
    out += motivation(body)
    out += ["## Tasks and labels", "",
            "Each query (a natural sentence and its required predicates, each citing approved facts) is written "
            "for one target trajectory and verified against every candidate of its video's frozen pool and, "
            "across videos, against every candidate of its split. A relation label is `1` when all required "
            "predicates are jointly supported, `0` when a necessary condition is demonstrably violated, `-1` "
            "(unknown, ⊥) otherwise. Pseudo-labels (`relations.pseudo`) are automatic easy negatives for training "
            "only and never ground truth. Evaluation (T2Traj, Traj2T, OCVR) scores binary, non-pseudo labels; "
            "`benchmark` lists each evaluated query with its pool version, target and complete candidate list.",
            ""]
    out += composition(body, stats)
    out += ["## Benchmark", "", *_benchmark_lines(stats), ""]
    out += collection(config)
    out += protocol(config)
    out += ["## How reliable the labels are", "", "### Audits", "", *_audit_lines(stats), ""]
    for a in body.get("unfinished_audits") or []:
        out.insert(-1, f"- Published before audit {a['id']} of {a['split']} was finished ({a['n_judged']} of "
                       f"{a['n_samples']} samples judged)")
    out += agreement_section(stats)
    out += ["![Agreement per review stage](plots/agreement.png)", ""]
    c = stats["corrections"]
    out += ["### Corrections and rejections", "",
            f"- Description versions by origin: {c['description_versions_by_origin']}",
            f"- Descriptions approved after a correction: {c['descriptions_approved_after_correction']}",
            f"- Query revisions: {c['query_revisions']}; queries by status: {stats['query_status']}",
            f"- Relations by source: {c['relations_by_source']}",
            f"- Adjudication votes by stage: {c['adjudication_votes_by_stage']}",
            "- Query rejection reasons: " + (", ".join(f"{k} ({v})" for k, v
                                                       in stats["query_rejection_reasons"].items()) or "none"), ""]
    out += ["### Reviewer time per accepted item", "", "| stage | votes | timed | seconds | accepted items | "
            "seconds per accepted item |", "|---|---|---|---|---|---|"]
    for stage, t in stats["reviewer_time"].items():
        out.append(f"| {stage} | {t['votes']} | {t['timed_votes']} | {_num(t['seconds_total'], 1)} | "
                   f"{t['accepted_items']} | {_num(t['seconds_per_accepted_item'], 1)} |")
    software = [f"{k} {v}" for k, v in (config.get("software") or {}).items()]
    out += ["", f"- Review policy: {config.get('review_policy')}", f"- Software: {', '.join(software)}", ""]
    out += uses(body)
    out += licences(body)
    out += maintenance(body)
    changes = body.get("changes") or {}
    out += ["## Changes since the parent", ""]
    if parent and changes:
        out += ["| table | added | removed | changed |", "|---|---|---|---|"]
        out += [f"| {t} | {d['added']} | {d['removed']} | {d['changed']} |" for t, d in changes.items()
                if d["added"] or d["removed"] or d["changed"]] or ["| (none) | 0 | 0 | 0 |"]
    else:
        out += ["None: this release has no parent."]
    out += ["", "## Files", "", "| table | rows | a row is |", "|---|---|---|"]
    out += [f"| `{name}` | {meta['rows']} | {meta['doc']} |" for name, meta in body["tables"].items()]
    out += ["", "Each table is in `data/<table>.jsonl` (one JSON object per line, keys sorted) and "
            "`data/<table>/<split>.parquet` (typed, below; `shared.parquet` for a table whose rows serve every "
            "split). `croissant.json` is Croissant 1.0 metadata of the Parquet "
            "files. `mot/<split>/<video>/gt/gt.txt` holds each video's candidates in MOTChallenge format (1-based "
            "frames and pixels). `index/records.tsv` names every record by table, key and hash (diffs between "
            "releases). `plots/` holds this card's figures. People appear under pseudonyms.", ""]
    out += _types()
    out += _loading(body)
    out += evaluation_section(body)
    out += ["## Citation", "", "```bibtex", _citation(body), "```", ""]
    return "\n".join(out)
