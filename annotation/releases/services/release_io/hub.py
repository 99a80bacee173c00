"""The YAML front matter that makes a release's README a Hugging Face dataset card.

One ``configs`` entry per table that has rows, each naming its Parquet file of every split where it
has rows as that split's data (:mod:`.splits`; a table whose rows serve every split lists its one
``shared`` file under each split of the release), so ``datasets.load_dataset(folder, "<table>",
split="test")`` reads exactly that table's test rows, ``split="all"`` the union of its splits, and
``load_dataset(folder)`` the default table, ``benchmark``, and never the MOT text files. The library
refuses a split without data, so a split where a table has no rows is not declared.
``dataset_info`` gives each config's features (:func:`features`, in the library's own YAML form);
the row counts are in the card's tables (a split's ``num_bytes`` there would be the library's own
Arrow size, which only the library knows).

The YAML is written here, not by a YAML library: block mappings and sequences, every string a
JSON string (which YAML reads as a double-quoted scalar), so the same release gives the same bytes.
"""
from __future__ import annotations

import json

import pyarrow as pa

from annotation.releases.services.release_io.schema import TABLE, TABLES
from annotation.releases.services.release_io.splits import SHARED

DEFAULT_CONFIG = "benchmark"
# the card's licence identifiers (the Hub's names for the licences a release may carry)
HUB_LICENSES = {"CC-BY-4.0": "cc-by-4.0", "CC-BY-SA-4.0": "cc-by-sa-4.0", "CC-BY-NC-4.0": "cc-by-nc-4.0",
                "CC0-1.0": "cc0-1.0"}
# arrow types as the datasets library names them
DTYPES = {"int64": "int64", "int32": "int32", "double": "float64", "float": "float32", "string": "string",
          "bool": "bool"}
SIZES = ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"), (1_000_000, "100K<n<1M"),
         (10_000_000, "1M<n<10M"), (100_000_000, "10M<n<100M"), (1_000_000_000, "100M<n<1B"))


def size_category(n: int) -> str:
    """The Hub's size category of ``n`` examples."""
    return next((name for bound, name in SIZES if n < bound), "n>1B")


def _type(t: pa.DataType):
    """One arrow type as the datasets library writes a feature's type in YAML: ``{"dtype": ...}``,
    ``{"list": ...}`` or ``{"struct": [...]}``."""
    if pa.types.is_struct(t):
        return {"struct": [{"name": f.name, **_type(f.type)} for f in t]}
    if pa.types.is_list(t):
        inner = _type(t.value_type)
        return {"list": inner["dtype"] if "dtype" in inner else inner["struct"] if "struct" in inner else inner}
    if pa.types.is_timestamp(t):
        return {"dtype": f"timestamp[{t.unit}, tz={t.tz}]" if t.tz else f"timestamp[{t.unit}]"}
    if str(t) not in DTYPES:
        raise ValueError(f"no datasets type for arrow type {t}")
    return {"dtype": DTYPES[str(t)]}


def features(schema: pa.Schema) -> list[dict]:
    """The ``features`` of a table's schema in ``dataset_info``."""
    return [{"name": f.name, **_type(f.type)} for f in schema]


def front_matter(body: dict) -> dict:
    """The card's metadata (``release.json``'s content in ``body``)."""
    # in the tables' order (release.json keeps them sorted); a table without rows has no config (the
    # library refuses a split without data)
    names = [t.name for t in TABLES if body["tables"].get(t.name, {}).get("rows")]
    default = DEFAULT_CONFIG if DEFAULT_CONFIG in names else names[0]
    configs, infos = [], []
    for name in [default, *(n for n in names if n != default)]:
        meta = body["tables"][name]
        entry = {"config_name": name}
        if name == default:
            entry["default"] = True
        files = meta["files"]["parquet"]
        entry["data_files"] = [{"split": split, "path": files.get(split) or files[SHARED]}
                               for split in body["splits"] if split in files or SHARED in files]
        configs.append(entry)
        infos.append({"config_name": name, "features": features(TABLE[name].schema())})
    license_id = HUB_LICENSES.get(body["license"])
    out = {"pretty_name": f"{body['name']} {body['version']}",
           "license": license_id or "other"}
    if license_id is None:
        out["license_name"] = body["license"]
    out |= {"language": ["en"], "task_categories": ["text-retrieval"],
            "size_categories": [size_category(body["counts"].get("relations", 0))],
            "tags": ["text-to-trajectory-retrieval", "video", "multi-object-tracking", "benchmark", "croissant",
                     *[f"split-{s}" for s in body["splits"]]],
            "configs": configs, "dataset_info": infos}
    return out


def _scalar(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    return json.dumps(value, ensure_ascii=True)


def _yaml(value, indent: int) -> list[str]:
    """Block YAML lines of a dict or list at ``indent`` spaces (scalars are written by the caller)."""
    pad, lines = " " * indent, []
    if isinstance(value, dict):
        for key, v in value.items():
            if isinstance(v, (dict, list)) and v:
                lines.append(f"{pad}{key}:")
                lines += _yaml(v, indent + 2)
            else:
                lines.append(f"{pad}{key}: {_scalar(v) if not isinstance(v, (dict, list)) else '[]'}")
        return lines
    for item in value:
        if isinstance(item, (dict, list)) and item:
            inner = _yaml(item, indent + 2)
            lines.append(f"{pad}- {inner[0].lstrip()}")
            lines += inner[1:]
        else:
            lines.append(f"{pad}- {_scalar(item)}")
    return lines


def front_matter_text(body: dict) -> str:
    """The card's first lines: ``---``, the metadata as YAML, ``---``."""
    return "\n".join(["---", *_yaml(front_matter(body), 0), "---", ""])
