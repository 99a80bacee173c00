"""Filling PostgreSQL for the benchmarks: ``COPY`` helpers and the synthetic records several
benchmarks share.

- :func:`copy_rows` streams Python tuples (psycopg adapts each value: bytes to ``bytea``, dicts
  as JSON text given as strings); :func:`copy_columns` writes whole columns (NumPy or Arrow) as CSV
  with pyarrow, for tables of millions of rows;
- :func:`bulk_load` sets a table's secondary indexes and its foreign-key and unique constraints
  aside while it is filled and builds them again afterwards (PostgreSQL's "Populating a
  Database" advice), then vacuums and analyses it, so the planner sees what a settled database holds;
- :func:`release_records` writes a train split with everything a release reads (sources, split
  groups, videos, proposal runs, trajectories, frozen pools and members, descriptions and their
  versions, accepted queries and their full rows of relations).
"""
from __future__ import annotations

import datetime as dt
import io
import json
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.csv as pa_csv
from django.db import connection, transaction

NOW = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
COPY_CHUNK_ROWS = 1 << 20                         # rows per CSV block handed to COPY


def _table(model_or_table) -> str:
    return model_or_table if isinstance(model_or_table, str) else model_or_table._meta.db_table


def copy_rows(model_or_table, columns: list[str], rows) -> int:
    """``COPY`` rows (tuples in ``columns`` order) into the table of ``model_or_table`` (a model or
    a table name); returns how many."""
    n = 0
    with connection.cursor() as cursor, cursor.cursor.copy(
            f"COPY {_table(model_or_table)} ({', '.join(columns)}) FROM STDIN") as copy:
        for row in rows:
            copy.write_row(row)
            n += 1
    return n


def copy_columns(model_or_table, columns: dict) -> int:
    """``COPY`` whole columns (name -> NumPy array, Arrow array or list, all of one length; ``None``
    is NULL) into the table of ``model_or_table``, as CSV that pyarrow writes in blocks of
    ``COPY_CHUNK_ROWS``. Timestamps go as :func:`utc_micros` columns (written without a zone,
    read in the session's, set to UTC here: a zone on every value makes the CSV writer ten times
    slower), booleans as ``bool`` arrays, ``bytea`` as ``\\x``-hex strings. Returns the row count."""
    table = pa.table({name: values if isinstance(values, pa.Array | pa.ChunkedArray) else pa.array(values)
                      for name, values in columns.items()})
    options = pa_csv.WriteOptions(include_header=False)
    with connection.cursor() as cursor:
        cursor.execute("SET TIME ZONE 'UTC'")
        with cursor.cursor.copy(f"COPY {_table(model_or_table)} ({', '.join(columns)}) FROM STDIN WITH (FORMAT csv)") \
                as copy:
            for start in range(0, table.num_rows, COPY_CHUNK_ROWS):
                buffer = io.BytesIO()
                pa_csv.write_csv(table.slice(start, COPY_CHUNK_ROWS), buffer, options)
                copy.write(buffer.getbuffer())
    return table.num_rows


def utc_micros(values: np.ndarray) -> pa.Array:
    """Microseconds since the epoch (UTC) as an Arrow timestamp column for :func:`copy_columns`."""
    return pa.array(np.asarray(values, np.int64), pa.timestamp("us"))


def next_id(model_or_table) -> int:
    """One more than the table's largest id (1 when empty)."""
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT COALESCE(MAX(id), 0) + 1 FROM {_table(model_or_table)}")
        return cursor.fetchone()[0]


def sequences_reset(*models_or_tables) -> None:
    """Move each table's id sequence past its largest id, after rows were copied with their ids."""
    with connection.cursor() as cursor:
        for table in map(_table, models_or_tables):
            cursor.execute(f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), "
                           f"COALESCE((SELECT MAX(id) FROM {table}), 0) + 1, false)")


@dataclass
class _SetAside:
    table: str
    constraints: list[tuple[str, str, str]]     # (name, kind 'u' or 'f', definition)
    indexes: list[tuple[str, str]]              # (name, CREATE INDEX statement)


def _set_aside(cursor, table: str) -> _SetAside:
    cursor.execute("SELECT conname, contype, pg_get_constraintdef(oid) FROM pg_constraint "
                   "WHERE conrelid = %s::regclass AND contype IN ('u', 'f') ORDER BY conname", [table])
    constraints = cursor.fetchall()
    cursor.execute("SELECT c.relname, pg_get_indexdef(i.indexrelid) FROM pg_index i "
                   "JOIN pg_class c ON c.oid = i.indexrelid WHERE i.indrelid = %s::regclass AND NOT i.indisprimary "
                   "AND NOT EXISTS (SELECT 1 FROM pg_constraint k WHERE k.conindid = i.indexrelid) ORDER BY c.relname",
                   [table])
    indexes = cursor.fetchall()
    for name, _, _ in constraints:
        cursor.execute(f'ALTER TABLE {table} DROP CONSTRAINT "{name}"')
    for name, _ in indexes:
        cursor.execute(f'DROP INDEX "{name}"')
    return _SetAside(table, constraints, indexes)


@contextmanager
def bulk_load(*models_or_tables, maintenance_work_mem: str = "256MB"):
    """Fill the tables without their secondary indexes, unique and foreign-key constraints (the
    primary key and check constraints stay); afterwards build the indexes and unique constraints,
    validate the foreign keys (each one query over the table, where row by row it would be one
    probe per row), then ``VACUUM ANALYZE`` (visibility map set, statistics current). Run outside a
    transaction (``VACUUM`` refuses one)."""
    tables = [_table(t) for t in models_or_tables]
    with connection.cursor() as cursor:
        aside = [_set_aside(cursor, t) for t in tables]
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute(f"SET maintenance_work_mem = '{maintenance_work_mem}'")
            for a in aside:
                for _, statement in a.indexes:
                    cursor.execute(statement)
                for name, kind, definition in a.constraints:
                    if kind == "u":
                        cursor.execute(f'ALTER TABLE {a.table} ADD CONSTRAINT "{name}" {definition}')
            for a in aside:
                for name, kind, definition in a.constraints:
                    if kind == "f":
                        cursor.execute(f'ALTER TABLE {a.table} ADD CONSTRAINT "{name}" {definition}')
            cursor.execute("RESET maintenance_work_mem")
            for t in tables:
                cursor.execute(f"VACUUM ANALYZE {t}")


# -- a released train split -------------------------------------------------------------------------
RELEASE_BASE = 10_000_000                         # ids far above anything the sequences hand out


def release_records(*, n_videos: int, traj_per_video: int = 100, queries_per_video: int = 10, n_obs: int = 20,
                    seed: int = 7, splits: tuple[str, ...] = ("train",)) -> dict:
    """Synthetic splits as database rows (video ``v`` in ``splits[v % len(splits)]``): ``n_videos`` videos
    (split group, proposal run and
    frozen pool each) of ``traj_per_video`` pooled trajectories of ``n_obs`` observations, and
    ``queries_per_video`` accepted queries per video (each on an approved description of one of
    the video's trajectories), each with its full within-video row of relations.

    Ids start at ``RELEASE_BASE``: video ``v`` (split group, run and pool alike) is
    ``RELEASE_BASE + v``, its trajectory ``t`` ``RELEASE_BASE + v * traj_per_video + t``. Returns
    the counts. One transaction: descriptions and their versions name each other (deferred
    foreign keys, checked at commit)."""
    with transaction.atomic():
        return _release_records(n_videos, traj_per_video, queries_per_video, n_obs, seed, splits)


def _release_records(n_videos: int, traj_per_video: int, queries_per_video: int, n_obs: int, seed: int,
                     splits: tuple[str, ...]) -> dict:
    from annotation.models import (
        CandidatePool,
        Description,
        DescriptionRun,
        DescriptionVersion,
        GenerationRun,
        PoolMember,
        Query,
        Relation,
    )
    from trajectories.models import (
        ProposalConfig,
        ProposalRun,
        Source,
        SplitGroup,
        Trajectory,
        Video,
    )

    BASE = RELEASE_BASE
    rng = np.random.default_rng(seed)
    V, T, Q, N_OBS = n_videos, traj_per_video, queries_per_video, n_obs
    copy_rows(Source, ["id", "name", "description", "created_at"], [(BASE, "bench-source", "", NOW)])
    copy_rows(SplitGroup, ["id", "name", "split", "locked_at", "created_at"],
              ((BASE + v, f"bench-group-{v}", splits[v % len(splits)], NOW, NOW) for v in range(V)))
    copy_rows(Video, ["id", "source_id", "split_group_id", "name", "kind", "path", "content_sha256", "size_bytes",
                      "fps", "frame_count", "width", "height", "duration_s", "codec", "seekable", "metadata",
                      "created_at"],
              ((BASE + v, BASE, BASE + v, f"bench-{v}", "file", f"bench/{v}.mp4", f"{v:064x}", 1000, 25.0, 500, 1920,
                1080, 20.0, "h264", True, "{}", NOW) for v in range(V)))
    copy_rows(ProposalConfig, ["id", "name", "version", "backend", "checkpoint_path", "checkpoint_sha256",
                               "model_config_path", "categories", "anchor_policy", "detector_settings",
                               "tracker_settings", "software", "config_hash", "created_at"],
              [(BASE, "bench", 1, "hog-bytetrack", "", "", "", '["person"]', "{}", "{}", "{}", "{}", "b" * 64, NOW)])
    copy_rows(ProposalRun, ["id", "video_id", "config_id", "status", "trajectory_count", "duplicate_count", "error",
                            "stats", "cancel_requested", "retries", "kind", "created_at", "finished_at"],
              ((BASE + v, BASE + v, BASE, "succeeded", T, 0, "", "{}", False, 0, "tracked", NOW, NOW)
               for v in range(V)))

    def tracks():
        for v in range(V):
            for t in range(T):
                start = int(rng.integers(0, 400))
                frames = np.arange(start, start + N_OBS, dtype="<i4")
                xy = rng.uniform(0, 1700, 2)
                boxes = np.concatenate([xy + np.cumsum(rng.normal(0, 2, (N_OBS, 2)), 0),
                                        xy + 80 + np.cumsum(rng.normal(0, 2, (N_OBS, 2)), 0)], 1)[:, [0, 1, 2, 3]]
                yield v, t, frames, boxes.astype("<f4")

    members = []

    def trajectory_rows():
        for v, t, frames, boxes in tracks():
            pk = BASE + v * T + t
            members.append((pk, v, frames.tobytes(), boxes.tobytes()))
            yield (pk, BASE + v, BASE + v, t + 1, "person", N_OBS, int(frames[0]), int(frames[-1]), frames.tobytes(),
                   boxes.tobytes(), np.full(N_OBS, 0.9, "<f4").tobytes(), b"", 1.0, N_OBS, 6400.0, 0, 0.9, NOW)

    copy_rows(Trajectory, ["id", "run_id", "video_id", "track_id", "category", "n_obs", "first_frame", "last_frame",
                           "frames", "boxes", "scores", "appearance", "temporal_coverage", "longest_run",
                           "median_area", "abrupt_changes", "mean_score", "created_at"], trajectory_rows())
    copy_rows(CandidatePool, ["id", "video_id", "version", "run_id", "reason", "n_members", "lineage",
                              "content_sha256", "created_at"],
              ((BASE + v, BASE + v, 1, BASE + v, "", T, "[]", "c" * 64, NOW) for v in range(V)))
    copy_rows(PoolMember, ["id", "pool_id", "trajectory_id", "role", "n_obs", "n_removed", "frames", "boxes"],
              ((pk, BASE + v, pk, "single", N_OBS, 0, f, b) for pk, v, f, b in members))
    members.clear()
    CandidatePool.objects.filter(id__gte=BASE).update(frozen_at=NOW)
    copy_rows(DescriptionRun, ["id", "backend", "prompt_version", "prompt_sha256", "budget", "stats", "status",
                               "error", "cancel_requested", "retries", "created_at"],
              [(BASE, '{"name": "heuristic"}', "heuristic-v1", "d" * 64, "{}", "{}", "succeeded", "", False, 0, NOW)])
    copy_rows(GenerationRun, ["id", "backend", "prompt_version", "prompt_sha256", "budget", "stats", "status",
                              "error", "cancel_requested", "retries", "created_at"],
              [(BASE, '{"name": "template"}', "template-v1", "e" * 64, "{}", "{}", "succeeded", "", False, 0, NOW)])
    content = json.dumps({"appearance": "a person in red", "motion": "walks right", "facts": [
        {"id": "f1", "kind": "attribute", "name": "upper_colour", "value": "red", "start_frame": 0, "end_frame": 20,
         "evidence_frames": [3], "scope": "whole", "known": True}]})
    targets = [(v, BASE + v * T + q) for v in range(V) for q in range(Q)]
    copy_rows(Description, ["id", "run_id", "pool_id", "trajectory_id", "status", "failure", "raw_outputs",
                            "attempts", "inputs", "approved_version_id", "created_at"],
              ((tid, BASE, BASE + v, tid, "approved", "", "[]", 1, "{}", tid, NOW) for v, tid in targets))
    copy_rows(DescriptionVersion, ["id", "description_id", "number", "origin", "content", "content_sha256",
                                   "created_at"],
              ((tid, tid, 1, "model", content, "f" * 64, NOW) for _, tid in targets))
    predicates = json.dumps([{"name": "upper_colour", "value": "red", "fact_ids": ["f1"]}])
    copy_rows(Query, ["id", "pool_id", "video_id", "target_id", "source_version_id", "run_id", "text", "predicates",
                      "revision", "status", "rejection_reason", "raw_output", "ratings", "created_at"],
              ((tid, BASE + v, BASE + v, tid, tid, BASE, f"the person in red number {tid}", predicates, 1,
                "accepted", "", "", "{}", NOW) for v, tid in targets))

    def relation_rows():
        pk = BASE
        for v, tid in targets:
            for t in range(T):
                candidate = BASE + v * T + t
                yield (pk, tid, candidate, int(candidate == tid), "human", "within", False,
                       '{"reviews": [1]}' if candidate == tid else '{"reviews": [0]}', NOW)
                pk += 1

    n_relations = copy_rows(Relation, ["id", "query_id", "trajectory_id", "label", "source", "stratum", "pseudo",
                                       "evidence", "decided_at"], relation_rows())
    return {"videos": V, "trajectories": V * T, "queries": len(targets), "relations": n_relations}


# -- usability review at scale ------------------------------------------------------------------
EXTRA_BASE = 20_000_000                           # ids of the second runs and their trajectories
ITEM_BASE = 30_000_000                            # ids of the work items
T0_US = int((NOW - dt.timedelta(days=365)).timestamp() * 1e6)


def review_users(*, n_raters: int, n_adjudicators: int, prefix: str = "bench") -> tuple[np.ndarray, np.ndarray]:
    """``n_raters`` annotators and ``n_adjudicators`` adjudicators (no usable password); their ids."""
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group

    from accounts.services import roles_ensure
    from common.roles import Role

    User = get_user_model()
    roles_ensure()
    raters = User.objects.bulk_create([User(username=f"{prefix}-rater-{i}", password="!") for i in range(n_raters)])
    adjudicators = User.objects.bulk_create([User(username=f"{prefix}-adjudicator-{i}", password="!")
                                             for i in range(n_adjudicators)])
    membership = User.groups.through
    annotator, adjudicator = Group.objects.get(name=Role.ANNOTATOR), Group.objects.get(name=Role.ADJUDICATOR)
    membership.objects.bulk_create([membership(user_id=u.pk, group_id=annotator.pk) for u in raters]
                                   + [membership(user_id=u.pk, group_id=adjudicator.pk) for u in adjudicators])
    return np.array([u.pk for u in raters]), np.array([u.pk for u in adjudicators])


def usability_review(*, n_videos: int, pooled_per_video: int, extra_per_video: int, raters: np.ndarray,
                     adjudicators: np.ndarray, panel: int, required: int, open_fraction: float,
                     accuracy: float = 0.8, seed: int = 11) -> dict:
    """Usability review of the videos of :func:`release_records` (which must exist): one item per
    pooled trajectory, and one per trajectory of a second run per video (``extra_per_video``
    trajectories of one observation, never pooled), ``panel`` seats each.

    An ``open_fraction`` of the second-run items is open with 0 to ``panel - 1`` votes; every other
    item has its full panel, each vote the true label with probability ``accuracy`` (else a label
    drawn at random); items without a panel majority are adjudicated (nine in ten, by one of
    ``adjudicators``) or wait in adjudication. States and decisions are the rule's
    (``annotation.rules.decide_counts``). Each panel vote has its completed seat
    (``Assignment``). Work item ids follow queue order (video, then trajectory). Returns counts."""
    from annotation.curation.stages import usability
    from annotation.models import Assignment, Vote, WorkItem
    from annotation.rules import ADJUDICATE_CODE, PENDING_CODE, decide_counts
    from trajectories.models import ProposalConfig, ProposalRun, Trajectory

    rng = np.random.default_rng(seed)
    V, T, E, R = n_videos, pooled_per_video, extra_per_video, len(raters)
    copy_rows(ProposalConfig, ["id", "name", "version", "backend", "checkpoint_path", "checkpoint_sha256",
                               "model_config_path", "categories", "anchor_policy", "detector_settings",
                               "tracker_settings", "software", "config_hash", "created_at"],
              [(EXTRA_BASE, "bench-second", 1, "hog-bytetrack", "", "", "", '["person"]', "{}", "{}", "{}", "{}",
                "9" * 64, NOW)])
    copy_rows(ProposalRun, ["id", "video_id", "config_id", "status", "trajectory_count", "duplicate_count", "error",
                            "stats", "cancel_requested", "retries", "kind", "created_at", "finished_at"],
              ((EXTRA_BASE + v, RELEASE_BASE + v, EXTRA_BASE, "succeeded", E, 0, "", "{}", False, 0, "tracked", NOW,
                NOW) for v in range(V)))
    n_extra = V * E
    extra_video = np.repeat(np.arange(V), E)
    first = rng.integers(0, 490, n_extra)
    copy_columns(Trajectory, {
        "id": EXTRA_BASE + np.arange(n_extra), "run_id": EXTRA_BASE + extra_video,
        "video_id": RELEASE_BASE + extra_video, "track_id": np.tile(np.arange(1, E + 1), V),
        "category": _constant(n_extra, "person"),
        "n_obs": np.ones(n_extra, np.int64), "first_frame": first, "last_frame": first,
        "frames": _constant(n_extra, "\\x" + np.zeros(1, "<i4").tobytes().hex()),
        "boxes": _constant(n_extra, "\\x" + np.array([[0, 0, 40, 90]], "<f4").tobytes().hex()),
        "scores": _constant(n_extra, "\\x" + np.full(1, 0.9, "<f4").tobytes().hex()),
        "appearance": _constant(n_extra, "\\x"), "temporal_coverage": np.ones(n_extra),
        "longest_run": np.ones(n_extra, np.int64), "median_area": np.full(n_extra, 3600.0),
        "abrupt_changes": np.zeros(n_extra, np.int64), "mean_score": np.full(n_extra, 0.9),
        "created_at": utc_micros(np.full(n_extra, T0_US))})

    # items in queue order: per video its pooled trajectories, then its second run's
    per_video = T + E
    n_items = V * per_video
    video = np.repeat(np.arange(V), per_video)                                     # [I]
    slot = np.tile(np.arange(per_video), V)                                        # [I]
    pooled = slot < T
    trajectory = np.where(pooled, RELEASE_BASE + video * T + slot, EXTRA_BASE + video * E + (slot - T))
    is_open = ~pooled & (rng.random(n_items) < open_fraction * per_video / max(E, 1))
    n_cast = np.where(is_open, rng.integers(0, panel, n_items), panel)            # [I]
    truth = np.where(pooled, 0, rng.integers(0, 2, n_items))                       # usable / unusable
    labels = np.where(rng.random((n_items, panel)) < accuracy, truth[:, None],
                      rng.integers(0, 3, (n_items, panel)))                        # [I, P]
    strides = np.array([s for s in range(1, R) if np.gcd(s, R) == 1] or [1])
    offset, stride = rng.integers(0, R, n_items), rng.choice(strides, n_items)    # distinct raters per item
    cast = np.arange(panel)[None, :] < n_cast[:, None]                             # [I, P]
    panel_counts = np.zeros((n_items, 3), np.int64)
    np.add.at(panel_counts, (np.nonzero(cast)[0], labels[cast]), 1)
    label_values = np.array(usability.STAGE.label_values)
    decisive = np.isin(label_values, usability.STAGE.decisive)
    code = decide_counts(panel_counts, panel_counts, np.zeros(n_items), decisive, required, panel)
    adjudicated = (code == ADJUDICATE_CODE) & (rng.random(n_items) < 0.9)
    adjudication_label = np.where(rng.random(n_items) < 0.9, truth, 2)
    all_counts = panel_counts.copy()
    np.add.at(all_counts, (np.flatnonzero(adjudicated), adjudication_label[adjudicated]), 1)
    final = decide_counts(panel_counts, all_counts, adjudicated.astype(int), decisive, required, panel)
    state = np.where(final >= 0, "decided", np.where(final == PENDING_CODE, "open",
                     np.where(final == ADJUDICATE_CODE, "adjudicate", "unresolved")))
    decision = np.where(final >= 0, label_values[np.clip(final, 0, 2)], "")
    item_us = T0_US + np.arange(n_items, dtype=np.int64) * (300 * 86400 * 10**6 // n_items)  # a vote round per item
    last_vote_us = item_us + n_cast * 60_000_000 + np.where(adjudicated, 3600 * 10**6, 0)
    ids = ITEM_BASE + np.arange(n_items)
    closed = (state == "decided") | (state == "unresolved")
    copy_columns(WorkItem, {
        "id": ids, "stage": _constant(n_items, "usability"), "video_id": RELEASE_BASE + video,
        "trajectory_id": trajectory, "panel_size": np.full(n_items, panel), "required_votes": np.full(n_items, required),
        "state": state, "decision": decision, "prelabels": _constant(n_items, "{}"), "disputed": _constant(n_items, "[]"),
        "decided_at": pa.array(last_vote_us, pa.timestamp("us"), mask=~closed),
        "created_at": utc_micros(item_us)})

    item_of, k = np.nonzero(cast)                                                  # panel votes, by item then seat
    n_panel = len(item_of)
    voter = raters[(offset[item_of] + k * stride[item_of]) % R]
    seconds = rng.gamma(2.0, 3000, n_panel).astype(np.int64)                       # ms
    voted_us = item_us[item_of] + (k + 1) * 60_000_000
    adj_items = np.flatnonzero(adjudicated)
    n_adj = len(adj_items)
    copy_columns(Vote, {
        "item_id": np.concatenate([ids[item_of], ids[adj_items]]),
        "annotator_id": np.concatenate([voter, adjudicators[adj_items % len(adjudicators)]]),
        "label": _strings(label_values, np.concatenate([labels[item_of, k], adjudication_label[adj_items]])),
        "reasons": _constant(n_panel + n_adj, "[]"), "payload": _constant(n_panel + n_adj, "{}"),
        "comment": pa.concat_arrays([_constant(n_panel, ""), _constant(n_adj, "no majority: checked the frames")]),
        "time_spent_ms": np.concatenate([seconds, rng.gamma(2.0, 6000, n_adj).astype(np.int64)]),
        "is_adjudication": np.concatenate([np.zeros(n_panel, bool), np.ones(n_adj, bool)]),
        "created_at": utc_micros(np.concatenate([voted_us, last_vote_us[adj_items]]))})
    copy_columns(Assignment, {
        "item_id": ids[item_of], "annotator_id": voter, "seat": k,
        "claimed_at": utc_micros(voted_us - seconds * 1000),
        "lease_expires_at": utc_micros(voted_us - seconds * 1000 + 600 * 10**6),
        "completed_at": utc_micros(voted_us)})
    states, counts = np.unique(state, return_counts=True)
    return {"items": n_items, "votes": n_panel + n_adj, "panel_votes": n_panel, "adjudication_votes": n_adj,
            "assignments": n_panel, "second_run_trajectories": n_extra,
            "item_states": dict(zip(states.tolist(), counts.tolist()))}


def _strings(values, codes: np.ndarray) -> pa.Array:
    """The string column ``values[codes]`` (plain strings, as the CSV writer takes them)."""
    return pa.array(list(values), pa.string()).take(pa.array(np.asarray(codes, np.int32)))


def _constant(n: int, value: str) -> pa.Array:
    """A string column of ``n`` times ``value``."""
    return _strings([value], np.zeros(n, np.int32))
