"""Play simulated annotators against the rendered ground truth (fills the demo's review)."""
from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from annotation.demo.simulation import ADJUDICATOR_ACCURACY, simulate_annotators
from annotation.models import WorkItem
from common.errors import ApplicationError
from common.progress import ProgressBar


class Command(BaseCommand):
    help = ("Vote on the open review items of rendered videos as N simulated annotators of a given accuracy "
            f"(and adjudicators, right {ADJUDICATOR_ACCURACY:.0%} of the time), through the review services.")

    def add_arguments(self, parser):
        parser.add_argument("--annotators", type=int, default=3, help="simulated annotators (at least the panel size)")
        parser.add_argument("--accuracy", type=float, default=0.9,
                            help="chance that an annotator votes the truth (otherwise another label at random)")
        parser.add_argument("--adjudicators", type=int, default=1, help="simulated adjudicators")
        parser.add_argument("--seed", type=int, default=0, help="seeds every simulated label")
        parser.add_argument("--stage", choices=[WorkItem.Stage.USABILITY, WorkItem.Stage.IDENTITY], default=None, help="only this stage")
        parser.add_argument("--max-votes", type=int, default=None,
                            help="stop after this many votes (panel and adjudication together)")

    def handle(self, *args, annotators, accuracy, adjudicators, seed, stage, max_votes, **options):
        try:
            with ProgressBar("simulating review") as bar:
                result = simulate_annotators(n_annotators=annotators, accuracy=accuracy, adjudicators=adjudicators,
                                             seed=seed, max_votes=max_votes, stage=stage, progress=bar)
        except ApplicationError as exc:
            raise CommandError(exc.message) from exc
        if result["blocked"]:
            self.stderr.write(self.style.WARNING(
                f"{result['blocked']} annotator(s) stopped at an item without ground truth; "
                f"{result['open']} item(s) with ground truth are still open"))
        accuracy_text = "n/a" if result["accuracy"] is None else f"{result['accuracy']:.1%}"
        self.stdout.write(self.style.SUCCESS(
            f"{result['votes']} votes, {result['adjudications']} adjudications; of {result['items']} items with "
            f"ground truth {result['decided']} decided ({accuracy_text} right), {result['unresolved']} unresolved, "
            f"{result['open']} open, {result['adjudicate']} awaiting adjudication; "
            f"{result['skipped']} without ground truth skipped"))
