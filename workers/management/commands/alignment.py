"""``python manage.py alignment``: rank candidate frozen text encoders for a snapshot before training
(SCOUT 5.2: mutual k-NN, linear CKA, ridge R²) and store the report."""
from __future__ import annotations

import json

from django.core.management.base import BaseCommand, CommandError

from annotation.models import RelationSnapshot
from common.errors import ApplicationError
from common.management.options import json_object_option
from workers.alignment import alignment_report_create
from workers.alignment_apis import AlignmentReportOutputSerializer


class Command(BaseCommand):
    help = ("Rank candidate frozen text encoders for a sealed relation snapshot by their alignment with its frozen "
            "trajectory features over the verified match pairs (mutual k-NN, CKA, ridge R²), before any training; "
            "the report is stored (GET /api/alignment-reports/).")

    def add_arguments(self, parser):
        parser.add_argument("--snapshot", type=int, required=True, help="relation snapshot id")
        parser.add_argument("--text-encoders", required=True,
                            help='candidates {name: TextEncoderConfig} as JSON or a JSON file, e.g. {"minilm": {}}')
        parser.add_argument("--k", type=int, default=10, help="neighbours of mutual k-NN (default 10)")
        parser.add_argument("--alpha", type=float, default=1.0, help="ridge penalty (default 1.0)")
        parser.add_argument("--folds", type=int, default=5, help="ridge R² cross-validation folds (default 5)")
        parser.add_argument("--seed", type=int, default=0, help="seeds the folds")
        parser.add_argument("--appearance", default=None, help="ImageEncoderConfig of the visual side as JSON")
        parser.add_argument("--features", default=None, help="FeatureConfig of the visual side as JSON")
        parser.add_argument("--json", action="store_true", help="print the stored report as JSON")
        parser.add_argument("--allow-held-out", action="store_true",
                            help="a dev or test snapshot anyway (the report is stamped held-out)")

    def handle(self, *args, snapshot, text_encoders, k, alpha, folds, seed, appearance, features, allow_held_out,
               **options):
        row = RelationSnapshot.objects.filter(pk=snapshot).first()
        if row is None:
            raise CommandError(f"--snapshot {snapshot}: no such relation snapshot")
        candidates = json_object_option(text_encoders, "--text-encoders")
        try:
            report = alignment_report_create(
                snapshot=row, text_encoders=candidates, k=k, alpha=alpha, n_folds=folds, seed=seed,
                appearance=json_object_option(appearance, "--appearance") if appearance else None,
                features=json_object_option(features, "--features") if features else None, allow_held_out=allow_held_out)
        except ApplicationError as exc:
            raise CommandError(exc.message) from exc
        if options["json"]:
            self.stdout.write(json.dumps(AlignmentReportOutputSerializer(report).data, indent=2, default=str))
            return
        self.stdout.write(f"alignment report #{report.pk} of snapshot {row.pk} over {report.n_pairs} pairs "
                          f"(k = {k}); most aligned first:")
        for rank, name in enumerate(report.ranking, 1):
            s = report.scores[name]
            self.stdout.write(f"  {rank}. {name}: mutual k-NN {s['mutual_knn']:.4f}  CKA {s['cka']:.4f}  "
                              f"ridge R² {s['ridge_r2']:.4f}")
