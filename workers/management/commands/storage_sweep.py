"""``python manage.py storage_sweep``: list the stored objects no record names, and remove them with
``--delete`` (``workers.storage_sweep``)."""
from __future__ import annotations

import datetime as dt
import json

from django.core.management.base import BaseCommand, CommandError

from common.errors import ApplicationError
from workers.storage_sweep import PREFIXES, storage_sweep


class Command(BaseCommand):
    help = (f"List the objects under {', '.join(p + '/' for p in PREFIXES)} in the store that no record names "
            "(what a failure between an upload and its row leaves), last written more than --older-than-hours "
            "ago; --delete removes them.")

    def add_arguments(self, parser):
        parser.add_argument("--delete", action="store_true", help="remove the orphans (default: only list them)")
        parser.add_argument("--older-than-hours", type=float, default=24.0,
                            help="only objects last written this long ago (default 24: younger ones may belong "
                                 "to a writer between its upload and its row)")
        parser.add_argument("--json", action="store_true", help="print the report as JSON")

    def handle(self, *args, delete, older_than_hours, json: bool = False, **options):
        if not (older_than_hours >= 0):
            raise CommandError(f"--older-than-hours must be 0 or more, got {older_than_hours}")
        try:
            report = storage_sweep(delete=delete, older_than=dt.timedelta(hours=older_than_hours))
        except ApplicationError as exc:
            raise CommandError(exc.message) from exc
        if json:
            self.stdout.write(_json_dumps(report))
            return
        self.stdout.write(f"{len(report['orphans'])} objects no record names in {report['store']} "
                          f"(last written more than {older_than_hours:g} h ago)")
        for orphan in report["orphans"]:
            self.stdout.write(f"  {orphan['key']}  ({orphan['reason']}; {orphan['modified']})")
        if delete:
            self.stdout.write(f"removed {len(report['removed'])}")
            for failure in report["failed"]:
                self.stderr.write(f"  not removed: {failure['key']}: {failure['error']}")
            if report["failed"]:
                raise CommandError(f"{len(report['failed'])} orphans could not be removed")
        elif report["orphans"]:
            self.stdout.write("run again with --delete to remove them")


def _json_dumps(value) -> str:
    return json.dumps(value, indent=2)
