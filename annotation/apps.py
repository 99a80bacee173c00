from django.apps import AppConfig


class AnnotationConfig(AppConfig):
    name = "annotation"
    verbose_name = "Annotation: curation, benchmark construction, releases"

    def ready(self) -> None:
        # Imported here: models are loaded only once every app config exists.
        from annotation.curation.services.items import work_items_open_on_run_stored
        from trajectories.signals import proposal_run_stored

        # Trajectories calls up through its one signal: open review of every stored proposal run.
        proposal_run_stored.connect(work_items_open_on_run_stored, dispatch_uid="annotation.open_review")
