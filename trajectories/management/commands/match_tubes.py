import json

from django.core.management.base import BaseCommand, CommandError

from common.errors import ApplicationError
from trajectories.models import ProposalRun
from trajectories.services.tube_matching import tube_match_report_create


class Command(BaseCommand):
    help = ("Match a run's proposals against the video's imported annotated tubes (seed D.1) and store the "
            "report of matched, ambiguous and unmatched tubes.")

    def add_arguments(self, parser):
        parser.add_argument("--tubes-run", type=int, required=True, help="the imported run of annotated tubes")
        parser.add_argument("--proposals-run", type=int, required=True, help="the run whose proposals are matched")
        parser.add_argument("--match-settings", default="{}",
                            help='JSON, e.g. {"tau": 0.5, "min_coverage": 0.5, "min_mean_iou": 0.4, "tau_safe": 0.2}')

    def handle(self, *args, tubes_run, proposals_run, match_settings, **options):
        runs = {r.pk: r for r in ProposalRun.objects.filter(pk__in=[tubes_run, proposals_run])}
        missing = [pk for pk in (tubes_run, proposals_run) if pk not in runs]
        if missing:
            raise CommandError(f"unknown run(s) {missing}")
        try:
            report = tube_match_report_create(tubes_run=runs[tubes_run], proposals_run=runs[proposals_run],
                                              config=json.loads(match_settings))
        except json.JSONDecodeError as exc:
            raise CommandError(f"--match-settings is not valid JSON: {exc}") from exc
        except ApplicationError as exc:
            raise CommandError(exc.message) from exc
        self.stdout.write(self.style.SUCCESS(f"report #{report.pk} on video #{report.video_id}: " + ", ".join(
            f"{n} {k}" for k, n in report.counts.items())))
        for tube in report.report["tubes"]:
            self.stdout.write(f"  tube {tube['tube_track_id']}: {tube['status']}; raw positives {tube['raw_positives']}, "
                              f"negative candidates {tube['negative_candidates']}")
