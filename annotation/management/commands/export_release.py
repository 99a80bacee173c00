"""Publish an immutable, versioned release of splits (or write an existing one again)."""
from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from annotation.models import Release
from annotation.releases.services.releases import DEFAULT_LICENSE, release_create, release_rewrite
from common.errors import ApplicationError


class Command(BaseCommand):
    help = ("Publish a release of splits: manifests, linked records, construction configuration, audit statistics, "
            "dataset card, Croissant metadata, MOT files and a SHA-256 manifest, under VAR_DIR/releases/NAME/VERSION. "
            "With --again, write an existing release's folder again from the database into --out (a round-trip "
            "check: after an import it reproduces the published bytes).")

    def add_arguments(self, parser):
        parser.add_argument("--name", required=True, help="release name, e.g. text2traj-demo")
        parser.add_argument("--release-version", dest="release_version", required=True,
                            help="MAJOR.MINOR.PATCH (--version is Django's own)")
        parser.add_argument("--splits", nargs="+", default=["dev", "test"], choices=["train", "dev", "test"])
        parser.add_argument("--parent", type=int, default=None,
                            help="id of the parent release (default: the latest release of the same name)")
        parser.add_argument("--description", default="")
        parser.add_argument("--license", default=DEFAULT_LICENSE)
        parser.add_argument("--include-media", action="store_true", help="copy the video files into the release")
        parser.add_argument("--publish-anyway", action="store_true",
                            help="publish although an audit of a released split is unfinished (the release records it)")
        parser.add_argument("--as-user", default=None, help="username recorded as its publisher")
        parser.add_argument("--again", action="store_true", help="write the existing release NAME VERSION again")
        parser.add_argument("--out", default=None, help="with --again: an empty or new folder to write into")

    def handle(self, *args, name, release_version, splits, parent, description, license, include_media, as_user,
               again, out, publish_anyway=False, **options):
        say = (lambda m: self.stdout.write(m)) if options["verbosity"] > 0 else None
        try:
            if again:
                if not out:
                    raise CommandError("--again needs --out FOLDER")
                release = Release.objects.filter(name=name, version=release_version).first()
                if release is None:
                    raise CommandError(f"no release {name} {release_version} here")
                written = release_rewrite(release=release, folder=out, progress=say)
                self.stdout.write(f"wrote {len(written.files)} files to {out}; SHA256SUMS {written.manifest_sha256} "
                                  f"(published: {release.manifest_sha256})")
                return
            user = get_user_model().objects.filter(username=as_user).first() if as_user else None
            parent_row = Release.objects.filter(pk=parent).first() if parent is not None else None
            if parent is not None and parent_row is None:
                raise CommandError(f"no release with id {parent}")
            release = release_create(name=name, version=release_version, splits=splits, parent=parent_row,
                                     description=description, license=license, include_media=include_media,
                                     publish_anyway=publish_anyway, created_by=user, progress=say)
        except ApplicationError as exc:
            detail = exc.extra.get("completeness") or exc.extra.get("problems")
            if exc.code == "audit_unfinished":
                detail = "add --publish-anyway to publish all the same (the release records the unfinished audits)"
            raise CommandError(f"{exc.message}" + (f"\n{detail}" if detail else "")) from exc
        except FileExistsError as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(f"release {release.pk}: {release.name} {release.version} at {release.path}")
        self.stdout.write(f"SHA256SUMS {release.manifest_sha256}")
