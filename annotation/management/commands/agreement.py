import json

from django.core.management.base import BaseCommand, CommandError

from annotation.curation.services.agreement import agreement_stats
from annotation.curation.stages import STAGE_NAMES
from common.errors import ApplicationError


class Command(BaseCommand):
    help = "Agreement statistics of a review stage (optionally one split), as a table or JSON."

    def add_arguments(self, parser):
        parser.add_argument("--stage", required=True, choices=STAGE_NAMES)
        parser.add_argument("--split", choices=["train", "dev", "test"])
        parser.add_argument("--json", action="store_true", help="print the whole report as JSON")

    def handle(self, *args, stage, split, json: bool = False, **options):
        try:
            report = agreement_stats(stage=stage, split=split)
        except ApplicationError as exc:
            raise CommandError(exc.message) from exc
        if json:
            self.stdout.write(_dumps(report))
            return

        def fmt(value):
            return "n/a" if value is None else (f"{value:.3f}" if isinstance(value, float) else str(value))

        self.stdout.write(f"{stage} ({report['split']}): {report['n_items']} items, {report['n_votes']} votes, "
                          f"{report['n_adjudication_votes']} adjudication votes")
        for key in ("raw_agreement", "fleiss_kappa", "krippendorff_alpha", "adjudication_rate"):
            self.stdout.write(f"  {key:<20} {fmt(report[key])}")
        self.stdout.write(f"  three-vote patterns  {report['vote_distributions']['patterns']}")
        self.stdout.write(f"  seconds per vote     {fmt((report['time_per_vote'] or {}).get('median'))} (median)")
        self.stdout.write("  annotator            votes  agreement-with-majority  mean seconds")
        for name, row in sorted(report["per_rater"].items()):
            self.stdout.write(f"  {name:<20} {row['n_votes']:>5}  {fmt(row['agreement_with_majority']):>23}  "
                              f"{fmt(row['mean_time']):>12}")


def _dumps(report) -> str:
    return json.dumps(report, indent=2, sort_keys=True)
