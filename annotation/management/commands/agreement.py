import json

from django.core.management.base import BaseCommand, CommandError

from annotation.curation.services.agreement import agreement_stats, decisions_and_agreement
from annotation.curation.stages import STAGE_NAMES
from common.errors import ApplicationError


class Command(BaseCommand):
    help = "Agreement statistics of a review stage (optionally one split), as a table or JSON."

    def add_arguments(self, parser):
        parser.add_argument("--stage", required=True, choices=STAGE_NAMES)
        parser.add_argument("--split", choices=["train", "dev", "test"])
        parser.add_argument("--json", action="store_true", help="print the whole report as JSON")
        parser.add_argument("--audit", action="store_true",
                            help="recompute the figures from every vote and check every item's stored decision "
                                 "against the rule (stages decided by the majority rule, all splits)")

    def handle(self, *args, stage, split, json: bool = False, audit: bool = False, **options):
        if audit and split:
            raise CommandError("--audit covers every split; leave --split out")
        try:
            if audit:  # one reading of the votes for both
                both = decisions_and_agreement(stage=stage)
                report, decisions = both["agreement"], both["decisions"]
            else:
                report, decisions = agreement_stats(stage=stage, split=split), None
        except ApplicationError as exc:
            raise CommandError(exc.message) from exc
        if json:
            self.stdout.write(_dumps(report if decisions is None else {**report, "decisions_audit": decisions}))
            return
        if decisions is not None:
            mismatched = decisions["mismatched"]
            self.stdout.write(f"decisions audit: {decisions['n_items']} items {decisions['outcomes']}; "
                              f"{len(mismatched)} stored decisions differ from the rule"
                              + (f" (items {', '.join(map(str, mismatched[:20]))}"
                                 f"{', ...' if len(mismatched) > 20 else ''})" if mismatched else ""))

        def fmt(value):
            return "n/a" if value is None else (f"{value:.3f}" if isinstance(value, float) else str(value))

        review = report["review"]
        self.stdout.write(f"{stage} ({report['split']}): {report['n_items']} items, {report['n_votes']} votes, "
                          f"{report['n_adjudication_votes']} adjudication votes")
        self.stdout.write(f"  unit                 {review['unit']}; people per unit: {review['people_per_unit']}")
        self.stdout.write(f"  measured             {review['measured']}")
        if review["kind"] == "single_review":
            self._single_review(report, fmt)
        else:
            for key in ("raw_agreement", "fleiss_kappa", "krippendorff_alpha", "adjudication_rate"):
                self.stdout.write(f"  {key:<20} {fmt(report[key])}")
            self.stdout.write(f"  three-vote patterns  {report['vote_distributions']['patterns']}")
        self.stdout.write(f"  seconds per vote     {fmt((report['time_per_vote'] or {}).get('median'))} (median)")
        self.stdout.write("  annotator            votes  agreement-with-majority  mean seconds")
        for name, row in sorted(report["per_rater"].items()):
            self.stdout.write(f"  {name:<20} {row['n_votes']:>5}  {fmt(row['agreement_with_majority']):>23}  "
                              f"{fmt(row['mean_time']):>12}")

    def _single_review(self, report: dict, fmt) -> None:
        d, a = report["dispute"], report["audit_agreement"]

        def interval(ci) -> str:
            return "(no interval)" if not ci else f"[{fmt(ci[0])}, {fmt(ci[1])}] 95% CI"

        self.stdout.write(f"  dispute rate         {fmt(d['rate'])} {interval(d['ci95'])} "
                          f"({d['n_disputed']} of {d['n_units']} units second-reviewed)")
        self.stdout.write(f"  first labels         {d['first_labels']}; second reviews {d['second_review_labels']}")
        self.stdout.write(f"  first = blind audit  {fmt(a['agreement'])} {interval(a['ci95'])} "
                          f"({a['n_agree']} of {a['n_judged']} random audit samples)")
        self.stdout.write(f"  adjudication_rate    {fmt(report['adjudication_rate'])}")


def _dumps(report) -> str:
    return json.dumps(report, indent=2, sort_keys=True)
