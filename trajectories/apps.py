from django.apps import AppConfig


class TrajectoriesConfig(AppConfig):
    name = "trajectories"
    verbose_name = "Videos, splits, proposal runs and trajectories"
