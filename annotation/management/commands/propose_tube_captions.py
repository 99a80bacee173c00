from django.core.management.base import BaseCommand, CommandError

from annotation.benchmark.services.tube_captions import tube_captions_propose
from annotation.models import CandidatePool
from common.errors import ApplicationError
from trajectories.models import TubeMatchReport


class Command(BaseCommand):
    help = ("Propose the captions of a tube-match report's matched tubes as descriptions of their raw positives "
            "in a frozen pool; each opens a description review item (never an approved description).")

    def add_arguments(self, parser):
        parser.add_argument("--report", type=int, required=True, help="tube-match report id")
        parser.add_argument("--pool", type=int, required=True, help="frozen pool of the report's video")

    def handle(self, *args, report, pool, **options):
        record = TubeMatchReport.objects.filter(pk=report).first()
        target = CandidatePool.objects.filter(pk=pool).first()
        if record is None or target is None:
            raise CommandError(f"unknown {'report' if record is None else 'pool'} #{report if record is None else pool}")
        try:
            counts = tube_captions_propose(report=record, pool=target)
        except ApplicationError as exc:
            raise CommandError(exc.message) from exc
        self.stdout.write(self.style.SUCCESS(
            f"description run #{counts['run']}: {counts['proposed']} caption(s) proposed for review, "
            f"{counts['kept_existing']} member(s) already described, {counts['not_in_pool']} raw positive(s) "
            "not in the pool"))
