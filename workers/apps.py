from django.apps import AppConfig


class WorkersConfig(AppConfig):
    name = "workers"
    verbose_name = "Jobs and workers"

    def ready(self) -> None:
        from workers import alignment  # noqa: F401  (AlignmentReport lives in its own module)
