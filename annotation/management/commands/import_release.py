"""Import a release folder into this (fresh) instance after checking its checksums."""
from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from annotation.releases.services.release_io.check import check_references, verify_checksums
from annotation.releases.services.releases import release_import
from common.errors import ApplicationError


class Command(BaseCommand):
    help = ("Check a release folder (every file against SHA256SUMS, every id against the tables it names) and import "
            "it: records with their ids and timestamps, video files when included. --check-only reports without "
            "importing.")

    def add_arguments(self, parser):
        parser.add_argument("path", help="the release folder")
        parser.add_argument("--expect-sha256", default=None,
                            help="the published SHA-256 of the release's SHA256SUMS file")
        parser.add_argument("--check-only", action="store_true")

    def handle(self, *args, path, expect_sha256, check_only, **options):
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
