"""Take the rendered demo videos from review to relation snapshots with simulated people."""
from __future__ import annotations

import json

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from annotation.demo.simulation_relations import simulated_benchmark_build
from common.errors import ApplicationError


class Command(BaseCommand):
    help = ("Play simulated reviewers through every stage on the rendered videos (curation, pools, descriptions, "
            "queries, relation rows, cross-video pairs) and take a relation snapshot per split.")

    def add_arguments(self, parser):
        parser.add_argument("--seed", type=int, default=0)
        parser.add_argument("--accuracy", type=float, default=0.95,
                            help="chance that a simulated reviewer answers (otherwise uncertain)")
        parser.add_argument("--as-user", default="manager", help="the manager recorded as creator")
        parser.add_argument("--json", action="store_true", help="print the full report as JSON")

    def handle(self, *args, seed, accuracy, as_user, **options):
        user = get_user_model().objects.filter(username=as_user).first()
        try:
            result = simulated_benchmark_build(seed=seed, accuracy=accuracy, created_by=user,
                                               progress=lambda m: self.stdout.write(m))
        except ApplicationError as exc:
            raise CommandError(exc.message) from exc
        if options["json"]:
            self.stdout.write(json.dumps(result, indent=2, default=str))
        for split, snap in result["snapshots"].items():
            self.stdout.write(f"{split}: {snap}")
