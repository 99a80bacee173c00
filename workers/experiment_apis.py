"""REST API of experiments (DESIGN 4.5): create a grid, follow it, read its table (JSON or CSV),
resume or cancel it, and list the named presets. Managers write; every staff member reads."""
from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation.models import RelationSnapshot
from common.pagination import Page, paginate
from common.params import flag_field, query_filters
from common.roles import IsManager, IsStaffMember, ManagerWritesStaffReads
from models.experiments.table import table_csv
from workers.experiments import (
    cell_state,
    experiment_cancel,
    experiment_cells,
    experiment_create,
    experiment_get,
    experiment_list,
    experiment_refresh,
    experiment_resume,
    preset_list,
)
from workers.models import Experiment, ExperimentCell

ERROR = OpenApiTypes.OBJECT
GRID_HELP = ('the grid: {"preset": "vtrajembed-table3", "variants": ["full", "without_slow"], "seeds": [0, 1, 2], '
             '"base": {TrainConfig keys shared by every cell}} or, without a preset, {"model_kind", "reference", '
             '"variants": {name: overrides merged into base}, ...}; "n_resamples" and "confidence" set the paired '
             'bootstrap')


class ExperimentCellSerializer(serializers.ModelSerializer):
    status = serializers.SerializerMethodField(help_text="the training's status until it has succeeded, then the "
                                                         "evaluation's (queued until it exists)")
    steps_done = serializers.IntegerField(source="training_run.steps_done", read_only=True)
    steps_total = serializers.IntegerField(source="training_run.steps_total", read_only=True)
    error = serializers.SerializerMethodField()

    class Meta:
        model = ExperimentCell
        fields = ["id", "variant", "seed", "training_run", "evaluation", "pipeline", "status", "steps_done",
                  "steps_total", "error"]

    def get_status(self, cell: ExperimentCell) -> str:
        return cell_state(cell, cell.experiment)

    def get_error(self, cell: ExperimentCell) -> str:
        if cell.training_run.error:
            return cell.training_run.error[-500:]
        if cell.evaluation is not None:
            return cell.evaluation.error[-500:]
        return cell.error[-500:]


class ExperimentOutputSerializer(serializers.ModelSerializer):
    status = serializers.CharField(help_text="running, succeeded, failed or cancelled (from its cells)")
    stamps = serializers.ListField(child=serializers.CharField(), read_only=True,
                                   help_text="train-split / incomplete: how every figure must be read")

    class Meta:
        model = Experiment
        fields = ["id", "name", "preset", "model_kind", "spec", "snapshot", "eval_snapshot", "snapshot_sha256",
                  "eval_snapshot_sha256", "code_version", "defaults_version", "stamps", "status", "cells_done",
                  "cells_total",
                  "created_by", "created_at", "updated_at", "finished_at"]


class ExperimentDetailOutputSerializer(ExperimentOutputSerializer):
    cells = serializers.SerializerMethodField()
    result = serializers.JSONField(
        read_only=True,
        help_text="the table: per task, metric and stratum, each variant's mean, std, delta and two intervals "
                  "(low/high/p_value: paired bootstrap over queries; hier_low/hier_high/hier_p_value: hierarchical "
                  "over seeds, then queries, null with hier_note under 2 paired seeds; 'intervals' names them); "
                  "'defaults' gives the versions of the defaults its runs read and whether it mixes them, and a "
                  "row's older_defaults marks seeds run on older ones")

    class Meta(ExperimentOutputSerializer.Meta):
        fields = [*ExperimentOutputSerializer.Meta.fields, "cells", "result"]

    @extend_schema_field(ExperimentCellSerializer(many=True))
    def get_cells(self, experiment: Experiment) -> list:
        cells = list(experiment_cells(experiment))
        for cell in cells:
            cell.experiment = experiment                       # cell_state reads its cancel flag
        return ExperimentCellSerializer(cells, many=True).data


class ExperimentListApi(APIView):
    permission_classes = [ManagerWritesStaffReads]
    pagination_class = Page

    class FilterSerializer(serializers.Serializer):
        status = serializers.CharField(required=False, max_length=16)
        preset = serializers.CharField(required=False, max_length=64)

    class InputSerializer(serializers.Serializer):
        snapshot = serializers.PrimaryKeyRelatedField(queryset=RelationSnapshot.objects.all(),
                                                      help_text="a sealed snapshot of the train split")
        eval_snapshot = serializers.PrimaryKeyRelatedField(queryset=RelationSnapshot.objects.all(),
                                                           help_text="a sealed dev or test snapshot")
        grid = serializers.JSONField(help_text=GRID_HELP)
        name = serializers.CharField(required=False, allow_blank=True, max_length=200, default="")
        allow_train_split = flag_field(required=False, default=False,
                                       help_text="evaluate on a train-split snapshot anyway (figures stamped)")
        allow_incomplete = flag_field(required=False, default=False,
                                      help_text="evaluate on an incomplete dev/test snapshot anyway (figures stamped)")

    @extend_schema(parameters=[FilterSerializer], responses=ExperimentOutputSerializer(many=True),
                   summary="Experiments, newest first")
    def get(self, request):
        f = query_filters(self.FilterSerializer, request)
        qs = experiment_list(status=f.get("status"), preset=f.get("preset"))
        return paginate(qs, ExperimentOutputSerializer, request, self)

    @extend_schema(request=InputSerializer, responses={202: ExperimentDetailOutputSerializer, 400: ERROR, 409: ERROR},
                   summary="Run an experiment grid: every variant × seed is a training run on the gpu queue")
    def post(self, request):
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        experiment = experiment_create(created_by=request.user, **data.validated_data)
        return Response(ExperimentDetailOutputSerializer(experiment).data, status=status.HTTP_202_ACCEPTED)


class ExperimentDetailApi(APIView):
    permission_classes = [IsStaffMember]

    @extend_schema(responses=ExperimentDetailOutputSerializer,
                   summary="One experiment: its cells and its table (recomputed as cells end)")
    def get(self, request, experiment_id: int):
        experiment = experiment_get(experiment_id=experiment_id)
        if experiment.status == Experiment.Status.RUNNING:
            experiment = experiment_refresh(experiment_id=experiment.pk, schedule=False)   # cells ended since
        return Response(ExperimentDetailOutputSerializer(experiment).data)


class ExperimentTableCsvApi(APIView):
    permission_classes = [IsStaffMember]

    @extend_schema(responses={(200, "text/csv"): OpenApiTypes.STR},
                   summary="The experiment's table as CSV (one line per task, metric, stratum and variant)")
    def get(self, request, experiment_id: int):
        experiment = experiment_get(experiment_id=experiment_id)
        response = HttpResponse(table_csv(experiment.result) if experiment.result else "",
                                content_type="text/csv; charset=utf-8")
        response["Content-Disposition"] = f'attachment; filename="experiment-{experiment.pk}.csv"'
        return response


class ExperimentResumeApi(APIView):
    permission_classes = [IsManager]

    @extend_schema(request=None, responses={202: ExperimentDetailOutputSerializer, 409: ERROR},
                   summary="Queue the experiment's failed and cancelled cells again (succeeded ones are kept)")
    def post(self, request, experiment_id: int):
        experiment = experiment_get(experiment_id=experiment_id)
        experiment_resume(experiment=experiment, user=request.user)
        resumed = experiment_get(experiment_id=experiment_id)
        return Response(ExperimentDetailOutputSerializer(resumed).data, status=status.HTTP_202_ACCEPTED)


class ExperimentCancelApi(APIView):
    permission_classes = [IsManager]

    @extend_schema(request=None, responses={200: ExperimentDetailOutputSerializer, 409: ERROR},
                   summary="Cancel the experiment's cells that have not ended")
    def post(self, request, experiment_id: int):
        experiment = experiment_cancel(experiment=experiment_get(experiment_id=experiment_id), user=request.user)
        return Response(ExperimentDetailOutputSerializer(experiment).data)


class ExperimentPresetListApi(APIView):
    permission_classes = [IsStaffMember]

    @extend_schema(responses={200: OpenApiTypes.OBJECT}, summary="The named experiment grids")
    def get(self, request):
        return Response({"presets": preset_list()})
