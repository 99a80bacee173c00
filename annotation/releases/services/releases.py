"""Versioned benchmark releases (DESIGN 2.11): publish, verify, diff, import.

A release is published once and never changes. :func:`release_create` refuses, before writing
anything, a release whose name and version exist, a version that does not come after its parent's,
an empty benchmark, a dev or test split that misses relations its galleries need (409
``incomplete_split`` with the completeness report of each such split and the missing pairs), and,
unless published anyway, a split with an unfinished audit (409 ``audit_unfinished``; published
anyway, the release records those audits). People get their stored pseudonyms
(:mod:`annotation.releases.services.pseudonyms`) before anything is written. It
writes the folder under a staging name, then the release row and its file rows in one transaction,
sealed (the database refuses any later change), then moves the folder into place and makes its
files read-only. A new release of an existing name records the latest one as its parent unless told
otherwise, and lists the records added, removed and changed since.

:func:`release_import` loads a release folder into a fresh instance after checking every file
against ``SHA256SUMS`` (a changed, missing or extra file refuses the import with the list of what
is wrong) and every id against the tables it names. :func:`release_rewrite` writes a release's
folder again from the database, which after an import reproduces the published bytes.
"""
from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction
from django.utils import timezone

from annotation.benchmark.services.mining import SPLITS, completeness_report
from annotation.models import Release, ReleaseFile
from annotation.releases.selectors import audit_list
from annotation.releases.services.pseudonyms import reviewer_pseudonyms_assign
from annotation.releases.services.release_io.check import (
    check_references,
    index_path,
    iter_records,
    read_checksums,
    verify_checksums,
)
from annotation.releases.services.release_io.export import (
    CHECKSUMS,
    FORMATS,
    ReleaseMeta,
    WrittenFile,
    WrittenRelease,
    data_files,
    file_sha256,
    make_read_only,
    release_write,
)
from annotation.releases.services.release_io.importer import import_tables
from annotation.releases.services.release_io.index_diff import diff_indexes
from annotation.releases.services.release_io.statistics import construction_config
from annotation.releases.services.release_io.tables import ReleaseScope
from annotation.releases.services.release_store import (
    mark_fetched,
    release_folder,
    release_key,
    release_root,
    release_store_remove,
    release_store_upload,
    stored_problems,
)
from common.errors import ApplicationError, ConflictError
from common.storage import store
from trajectories.models import Video

NAME_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,99}$")
VERSION_RE = re.compile(r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)$")
DEFAULT_LICENSE = "CC-BY-4.0"
MISSING_LISTED = 200
MAX_VERSION_PART = 10 ** 6                       # each of MAJOR, MINOR, PATCH at most


def _version(text: str, *, bounded: bool = True) -> tuple[int, int, int]:
    """``MAJOR.MINOR.PATCH`` as numbers; ``bounded``: each at most ``MAX_VERSION_PART`` (a version
    recorded before the bound existed is read unbounded, so a new one can still be compared to it)."""
    match = VERSION_RE.match(text or "")
    if match is None:
        raise ApplicationError(f"version {text!r} must be MAJOR.MINOR.PATCH, e.g. 1.0.0", code="invalid_version")
    number = tuple(int(x) for x in match.groups())
    if bounded and max(number) > MAX_VERSION_PART:
        raise ApplicationError(f"version {text!r} has a component over {MAX_VERSION_PART}; a later version could "
                               "never follow it", code="invalid_version", extra={"max_component": MAX_VERSION_PART})
    return number


def _parent_ref(parent: Release | None) -> dict:
    return {} if parent is None else {"name": parent.name, "version": parent.version,
                                      "manifest_sha256": parent.manifest_sha256}


def release_incomplete_splits(*, splits: list[str]) -> dict:
    """The completeness report (with up to ``MISSING_LISTED`` missing pairs) of every dev or test
    split in ``splits`` that misses a relation its galleries need."""
    out = {}
    for split in splits:
        if split in ("dev", "test"):
            report = completeness_report(split=split, limit=MISSING_LISTED)
            if not report["complete"]:
                out[split] = report
    return out


def release_unfinished_audits(*, splits: list[str]) -> list[dict]:
    """The audits of ``splits`` with samples still unjudged, oldest first."""
    audits = audit_list().filter(split__in=list(splits)).order_by("id")
    return [{"id": a.pk, "split": a.split, "n_samples": a.n_samples, "n_judged": a.n_judged}
            for a in audits if a.n_judged < a.n_samples]


def _latest(name: str) -> Release | None:
    return Release.objects.filter(name=name).order_by("-created_at", "-id").first()


def release_preflight(*, splits: list[str], name: str | None = None) -> dict:
    """What publishing ``splits`` (under ``name``) would meet, without writing anything: the
    benchmark videos it would hold, the dev/test splits that miss relations, the unfinished audits
    that need a "publish anyway", and the parent a new version would follow."""
    if not splits or any(s not in SPLITS for s in splits) or len(set(splits)) != len(splits):
        raise ApplicationError(f"splits must be distinct values of {list(SPLITS)}", code="invalid_split")
    parent = _latest(name) if name else None
    return {"splits": [s for s in SPLITS if s in splits], "videos": len(ReleaseScope.of(splits).videos),
            "incomplete": release_incomplete_splits(splits=splits),
            "unfinished_audits": release_unfinished_audits(splits=splits),
            "parent": None if parent is None else {"id": parent.pk, "name": parent.name, "version": parent.version}}


def release_create(*, name: str, version: str, splits: list[str], parent: Release | None = None,
                   description: str = "", license: str = DEFAULT_LICENSE, include_media: bool = False,
                   publish_anyway: bool = False, created_by=None,
                   progress: Callable[[str], None] | None = None) -> Release:
    """Publish a release of ``splits`` (see the module docstring for what is refused).
    ``publish_anyway``: publish although an audit of a released split is unfinished (recorded)."""
    if not NAME_RE.match(name or ""):
        raise ApplicationError("name must be 1-100 characters of a-z, 0-9, '.', '_' or '-', starting with a letter "
                               "or digit", code="invalid_name")
    number = _version(version)
    if not splits or any(s not in SPLITS for s in splits) or len(set(splits)) != len(splits):
        raise ApplicationError(f"splits must be distinct values of {list(SPLITS)}", code="invalid_split")
    if not license.strip():
        raise ApplicationError("a release needs a license", code="invalid_license")
    if Release.objects.filter(name=name, version=version).exists():
        raise ConflictError(f"release {name} {version} exists and never changes; publish a new version",
                            code="release_exists")
    if parent is None:
        parent = _latest(name)
    if parent is not None and parent.name == name and _version(parent.version, bounded=False) >= number:
        raise ConflictError(f"version {version} must come after its parent's {parent.version}",
                            code="version_not_after_parent")
    incomplete = release_incomplete_splits(splits=splits)
    if incomplete:
        missing = ", ".join(f"{s}: {r['missing']} ({r['missing_by_kind']})" for s, r in incomplete.items())
        raise ConflictError(f"a released dev or test split needs every relation its galleries score; missing {missing}",
                            code="incomplete_split", extra={"completeness": incomplete})
    unfinished = release_unfinished_audits(splits=splits)
    if unfinished and not publish_anyway:
        listed = ", ".join(f"audit {a['id']} of {a['split']} ({a['n_judged']} of {a['n_samples']} judged)"
                           for a in unfinished)
        raise ConflictError(f"an audit of a released split is unfinished: {listed}; finish it, or publish anyway "
                            "and the release records it", code="audit_unfinished",
                            extra={"unfinished_audits": unfinished})
    scope = ReleaseScope.of(splits)
    if not scope.videos:
        raise ConflictError(f"the splits {splits} have no benchmark video yet (a frozen pool of two candidates or "
                            "more with an accepted query)", code="empty_release")
    final = release_root() / name / version
    if final.exists():
        raise ConflictError(f"{final} exists although no release row names it; move it away first",
                            code="release_folder_exists")
    if parent is not None:
        problems = verify_checksums(release_folder(parent), expect_manifest_sha256=parent.manifest_sha256)
        if problems:
            raise ConflictError(f"the parent release {parent} on disk is not what was published, so no diff "
                                f"against it can be trusted: {problems[0]}", code="parent_tampered",
                                extra={"problems": problems[:50]})
    if include_media:
        missing = [str(p) for p in Video.objects.filter(id__in=scope.videos).order_by("id").values_list("path", flat=True)
                   if not (Path(settings.MEDIA_ROOT) / p).is_file()]
        if missing:
            raise ConflictError(f"{len(missing)} video files are missing from the media folder: {missing[:5]}",
                                code="media_missing", extra={"missing": missing[:200]})
    created_at = timezone.now()
    meta = ReleaseMeta(name=name, version=version, description=description, license=license, splits=scope.splits,
                       created_at=created_at, parent=_parent_ref(parent), media_included=include_media,
                       config=construction_config(scope), unfinished_audits=unfinished)
    reviewer_pseudonyms_assign(people=scope.people())
    staging = release_root() / f".staging-{name}-{version}-{created_at.timestamp():.0f}"
    # with a bucket, the files are stored before the row names them (release_store)
    key = release_key(name, version) if store().remote else None
    try:
        written = release_write(staging, meta=meta, scope=scope,
                                parent_folder=release_folder(parent) if parent is not None else None,
                                progress=progress)
        if key:
            release_store_upload(staging, key=key, paths=[f.path for f in written.files])
            (progress or (lambda _m: None))(f"stored under {store().name(key)}")
        try:
            with transaction.atomic():
                release = _seal(meta, written, path=key or final, origin=Release.Origin.EXPORTED, parent=parent,
                                created_by=created_by)
                final.parent.mkdir(parents=True, exist_ok=True)
                staging.rename(final)
        except BaseException:
            if key:
                release_store_remove(key)
            raise
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    make_read_only(final)
    if key:
        mark_fetched(release)
    return release


def _seal(meta: ReleaseMeta, written: WrittenRelease, *, path: Path | str, origin: str, parent: Release | None,
          created_by) -> Release:
    """The release row and its file rows, then sealed (the database refuses changes from then on)."""
    release = Release.objects.create(
        name=meta.name, version=meta.version, description=meta.description, license=meta.license,
        splits=meta.splits, parent=parent, parent_ref=meta.parent, origin=origin, media_included=meta.media_included,
        path=str(path), manifest_sha256=written.manifest_sha256, counts=written.counts, config=meta.config,
        stats=written.stats, changes=written.changes, unfinished_audits=meta.unfinished_audits or None,
        created_by=created_by, created_at=meta.created_at)
    ReleaseFile.objects.bulk_create([ReleaseFile(release=release, path=f.path, sha256=f.sha256, size_bytes=f.size_bytes,
                                                 rows=f.rows) for f in written.files], batch_size=2000)
    release.sealed_at = timezone.now()
    release.save(update_fields=["sealed_at"])
    return release


def release_meta(release: Release) -> ReleaseMeta:
    return ReleaseMeta(name=release.name, version=release.version, description=release.description,
                       license=release.license, splits=list(release.splits), created_at=release.created_at,
                       parent=dict(release.parent_ref), media_included=release.media_included,
                       config=release.config, changes=release.changes, withheld=release.stats.get("withheld", {}),
                       unfinished_audits=list(release.unfinished_audits or []))


def release_rewrite(*, release: Release, folder: Path, progress: Callable[[str], None] | None = None
                    ) -> WrittenRelease:
    """Write ``release``'s folder again from the database into the empty ``folder`` (nothing is
    recorded): after an import, the same bytes as the published folder."""
    return release_write(Path(folder), meta=release_meta(release), scope=ReleaseScope.of(list(release.splits)),
                         progress=progress)


def release_verify(*, release: Release) -> list[str]:
    """What differs between the release's folder (and, for a stored release, its objects) and what
    was published (empty: nothing)."""
    stored = stored_problems(release)
    folder = release_folder(release)
    problems = stored + verify_checksums(folder, expect_manifest_sha256=release.manifest_sha256)
    on_disk = {f.path: f.sha256 for f in release.files.all()}
    try:
        listed = read_checksums(folder)
    except ValueError:
        return problems
    listed[CHECKSUMS] = release.manifest_sha256
    if listed != on_disk:
        problems.append("the folder's SHA256SUMS does not list the files recorded for the release")
    return problems


def release_diff(*, old: Release, new: Release, limit: int = 100) -> dict:
    """Records added, removed and changed from ``old`` to ``new`` (both folders verified first)."""
    for release in (old, new):
        problems = verify_checksums(release_folder(release), expect_manifest_sha256=release.manifest_sha256)
        if problems:
            raise ConflictError(f"release {release} on disk is not what was published: {problems[0]}",
                                code="release_tampered", extra={"problems": problems[:50]})
    diff = diff_indexes(index_path(release_folder(old)), index_path(release_folder(new)), limit=limit)
    return {"old": {"id": old.pk, "name": old.name, "version": old.version},
            "new": {"id": new.pk, "name": new.name, "version": new.version}, **diff}


def release_import(*, path: str | Path, expect_manifest_sha256: str | None = None, imported_by=None,
                   progress: Callable[[str], None] | None = None) -> Release:
    """Import the release folder at ``path`` into this instance (see the module docstring).

    Refused: a folder whose files do not match ``SHA256SUMS`` (or whose ``SHA256SUMS`` is not the
    expected one) with every problem listed (409 ``release_tampered``); ids that do not resolve (409
    ``release_inconsistent``); a release or records this instance holds already (409 ``not_fresh``).
    The folder is copied under this instance's release folder; its video files, when included, into
    the media folder. One transaction: a failure imports nothing.
    """
    source = Path(path)
    say = progress or (lambda _message: None)
    problems = verify_checksums(source, expect_manifest_sha256=expect_manifest_sha256)
    if problems:
        raise ConflictError(f"release at {source} fails its checksum check: {problems[0]}"
                            + (f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""),
                            code="release_tampered", extra={"problems": problems[:50]})
    body = json.loads((source / "release.json").read_text(encoding="utf-8"))
    if body.get("format") not in FORMATS:
        raise ApplicationError(f"release format {body.get('format')!r} is not one of {', '.join(FORMATS)}",
                               code="unknown_format")
    unresolved, _ = check_references(source)
    if unresolved:
        raise ConflictError(f"release at {source} names records it does not hold: {unresolved[0]}",
                            code="release_inconsistent", extra={"problems": unresolved[:50]})
    say("checksums and references verified")
    _check_fresh(source, body)
    final = release_root() / body["name"] / body["version"]
    if final.exists():
        raise ConflictError(f"{final} exists already", code="not_fresh")
    final.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(source, final)
    media_copied: list[Path] = []
    key = release_key(body["name"], body["version"]) if store().remote else None
    stored = False
    try:
        if key:
            release_store_upload(final, key=key, paths=[*sorted(read_checksums(final)), CHECKSUMS])
            stored = True
        with transaction.atomic():
            try:
                import_tables(final, progress=say)
            except IntegrityError as exc:
                raise ConflictError(f"the release's records clash with this instance's: {exc}; import into a fresh "
                                    "instance", code="not_fresh") from None
            if body["media_included"]:
                for video in (final / "media").rglob("*"):
                    if video.is_file():
                        target = Path(settings.MEDIA_ROOT) / video.relative_to(final / "media")
                        target.parent.mkdir(parents=True, exist_ok=True)
                        shutil.copyfile(video, target)
                        media_copied.append(target)
            parent_ref = body.get("parent") or {}
            parent = Release.objects.filter(name=parent_ref.get("name"), version=parent_ref.get("version"),
                                            manifest_sha256=parent_ref.get("manifest_sha256")).first() \
                if parent_ref else None
            meta = ReleaseMeta(name=body["name"], version=body["version"], description=body["description"],
                               license=body["license"], splits=body["splits"],
                               created_at=datetime.fromisoformat(body["created_at"]), parent=parent_ref,
                               media_included=body["media_included"],
                               config=json.loads((final / "construction.json").read_text(encoding="utf-8")),
                               changes=body.get("changes") or {},
                               unfinished_audits=body.get("unfinished_audits") or [])
            release = _seal(meta, _written_from_folder(final, body), path=key or final,
                            origin=Release.Origin.IMPORTED, parent=parent, created_by=imported_by)
    except BaseException:
        shutil.rmtree(final, ignore_errors=True)
        for target in media_copied:
            target.unlink(missing_ok=True)
        if stored:
            release_store_remove(key)
        raise
    make_read_only(final)
    if key:
        mark_fetched(release)
    say(f"imported release {release} ({release.manifest_sha256[:12]})")
    return release


def _written_from_folder(folder: Path, body: dict) -> WrittenRelease:
    rows = {path: n for meta in body["tables"].values() for path, n in data_files(meta)}
    files = [WrittenFile(path, sha, (folder / path).stat().st_size, rows.get(path))
             for path, sha in sorted(read_checksums(folder).items())]
    manifest = file_sha256(folder / CHECKSUMS)
    files.append(WrittenFile(CHECKSUMS, manifest, (folder / CHECKSUMS).stat().st_size))
    stats = json.loads((folder / "statistics.json").read_text(encoding="utf-8"))
    return WrittenRelease(folder=folder, manifest_sha256=manifest, files=files, counts=body["counts"], stats=stats,
                          changes=body.get("changes") or {})


def _check_fresh(folder: Path, body: dict) -> None:
    """Refuse an import into an instance that holds the release or any of its videos or people."""
    if Release.objects.filter(name=body["name"], version=body["version"]).exists():
        raise ConflictError(f"release {body['name']} {body['version']} is here already", code="not_fresh")
    videos = [(r["id"], r["content_sha256"]) for r in iter_records(folder, "videos")]
    clash = Video.objects.filter(pk__in=[v for v, _ in videos]).exists() or \
        Video.objects.filter(content_sha256__in=[s for _, s in videos]).exists()
    names = [r["pseudonym"] for r in iter_records(folder, "reviewers")]
    if clash or get_user_model().objects.filter(username__in=names).exists():
        raise ConflictError("this instance holds records of the release (videos or people) already; import into a "
                            "fresh instance", code="not_fresh")
