"""Import a release folder (or one stored in the platform's store) into this (fresh) instance after
checking its checksums."""
from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from annotation.releases.services.release_io.check import check_references, verify_checksums
from annotation.releases.services.release_store import release_fetch_stored
from annotation.releases.services.releases import release_import
from common.errors import ApplicationError


class Command(BaseCommand):
    help = ("Check a release folder (every file against SHA256SUMS, every id against the tables it names) and import "
            "it: records with their ids and timestamps, video files when included. --check-only reports without "
            "importing.")

    def add_arguments(self, parser):
        parser.add_argument("path", help="the release folder, or with --from-store its key in the store "
                                         "(e.g. releases/demo/1.0.0)")
        parser.add_argument("--from-store", action="store_true",
                            help="PATH is a key in the platform's store (TRAJLAB_STORAGE_URL): fetch it, each object "
                                 "checked against its stored SHA-256, then check and import it")
        parser.add_argument("--expect-sha256", default=None,
                            help="the published SHA-256 of the release's SHA256SUMS file")
        parser.add_argument("--check-only", action="store_true")

    def handle(self, *args, path, expect_sha256, check_only, from_store, **options):
        if not from_store:
            return self._handle(path, expect_sha256, check_only, options)
        fetched = Path(tempfile.mkdtemp(prefix="release-fetch-"))
        try:
            try:
                release_fetch_stored(path.strip("/"), fetched / "release")
            except ApplicationError as exc:
                raise CommandError(exc.message) from exc
            return self._handle(str(fetched / "release"), expect_sha256, check_only, options)
        finally:
            shutil.rmtree(fetched, ignore_errors=True)

    def _handle(self, path, expect_sha256, check_only, options):
        if check_only:
            problems = verify_checksums(path, expect_manifest_sha256=expect_sha256)
            if not problems:
                unresolved, checked = check_references(path)
                problems += unresolved
                self.stdout.write(f"references checked: {sum(checked.values())}")
            if problems:
                raise CommandError("the release fails its check:\n" + "\n".join(problems))
            self.stdout.write("checksums and references are in order")
            return
        say = (lambda m: self.stdout.write(m)) if options["verbosity"] > 0 else None
        try:
            release = release_import(path=path, expect_manifest_sha256=expect_sha256, progress=say)
        except ApplicationError as exc:
            problems = exc.extra.get("problems") or []
            raise CommandError("\n".join([exc.message, *problems[1:]])) from exc
        self.stdout.write(f"release {release.pk}: {release.name} {release.version} at {release.path}")
