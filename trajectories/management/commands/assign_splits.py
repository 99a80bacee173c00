from django.core.management.base import BaseCommand, CommandError

from common.errors import ApplicationError
from trajectories.models import SplitGroup
from trajectories.services.splits import splits_assign


def parse_ratios(text: str) -> dict[str, float]:
    try:
        return {k.strip(): float(v) for k, v in (part.split("=") for part in text.split(","))}
    except ValueError:
        raise CommandError(f"--ratios must look like train=0.7,dev=0.15,test=0.15, got {text!r}") from None


class Command(BaseCommand):
    help = "Assign train/dev/test to split groups (seeded, ratio-driven, group-preserving)."

    def add_arguments(self, parser):
        parser.add_argument("--seed", type=int, required=True)
        parser.add_argument("--ratios", default="train=0.7,dev=0.15,test=0.15")
        parser.add_argument("--reassign", action="store_true", help="re-draw assigned groups that are not locked")

    def handle(self, *args, seed, ratios, reassign, **options):
        try:
            assignment = splits_assign(seed=seed, ratios=parse_ratios(ratios), reassign=reassign)
        except ApplicationError as exc:
            raise CommandError(exc.message) from exc
        for name, split in sorted(assignment.result.items()):
            self.stdout.write(f"{name}: {split}")
        for group in SplitGroup.objects.exclude(name__in=assignment.result).order_by("name"):
            self.stdout.write(f"{group.name}: {group.split or '-'} (kept{', locked' if group.locked_at else ''})")
