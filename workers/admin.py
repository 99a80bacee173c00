from django.contrib import admin

from workers.models import EvaluationRun, TrainingRun, TrainingStep


@admin.register(TrainingRun)
class TrainingRunAdmin(admin.ModelAdmin):
    """Read-only: runs change only through their services (create, execute, cancel)."""

    list_display = ["id", "model_kind", "snapshot", "eval_snapshot", "status", "steps_done", "steps_total",
                    "created_by", "created_at", "finished_at"]
    list_filter = ["model_kind", "status"]
    readonly_fields = [f.name for f in TrainingRun._meta.fields]


@admin.register(TrainingStep)
class TrainingStepAdmin(admin.ModelAdmin):
    list_display = ["run", "step", "attempt", "loss", "created_at"]
    list_filter = ["run"]
    readonly_fields = [f.name for f in TrainingStep._meta.fields]


@admin.register(EvaluationRun)
class EvaluationRunAdmin(admin.ModelAdmin):
    list_display = ["id", "kind", "training_run", "model_kind", "snapshot", "status", "created_at", "finished_at"]
    list_filter = ["kind", "status"]
    readonly_fields = [f.name for f in EvaluationRun._meta.fields]
