from django.apps import AppConfig


class CommonConfig(AppConfig):
    name = "common"
    verbose_name = "Common infrastructure"

    def ready(self) -> None:
        from common.registry import registered_backends

        registered_backends()  # a malformed TRAJLAB_BACKENDS stops start-up with the entry named
