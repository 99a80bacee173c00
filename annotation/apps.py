from django.apps import AppConfig


class AnnotationConfig(AppConfig):
    name = "annotation"
    verbose_name = "Annotation: votes, descriptions, queries, relations, releases"

    def ready(self) -> None:
        # The later review stages register their vote handlers and re-verification hooks on import.
        import annotation.services.descriptions
        import annotation.services.mining
        import annotation.services.queries  # noqa: F401
        from annotation.services.items import work_items_open_automatically
        from trajectories.services.proposals import RUN_STORED_HOOKS

        if work_items_open_automatically not in RUN_STORED_HOOKS:
            RUN_STORED_HOOKS.append(work_items_open_automatically)
