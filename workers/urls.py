from django.urls import path

from workers import alignment_apis, apis, backend_apis, experiment_apis

urlpatterns = [
    path("training-runs/", apis.TrainingRunListApi.as_view(), name="training-run-list"),
    path("training-runs/<int:run_id>/", apis.TrainingRunDetailApi.as_view(), name="training-run-detail"),
    path("training-runs/<int:run_id>/cancel/", apis.TrainingRunCancelApi.as_view(), name="training-run-cancel"),
    path("evaluation-runs/", apis.EvaluationRunListApi.as_view(), name="evaluation-run-list"),
    path("evaluation-runs/<int:run_id>/", apis.EvaluationRunDetailApi.as_view(), name="evaluation-run-detail"),
    path("backends/", backend_apis.BackendListApi.as_view(), name="backend-list"),
    path("search/", apis.SearchApi.as_view(), name="search"),
    path("experiments/", experiment_apis.ExperimentListApi.as_view(), name="experiment-list"),
    path("experiments/presets/", experiment_apis.ExperimentPresetListApi.as_view(), name="experiment-presets"),
    path("experiments/<int:experiment_id>/", experiment_apis.ExperimentDetailApi.as_view(), name="experiment-detail"),
    path("experiments/<int:experiment_id>/table.csv", experiment_apis.ExperimentTableCsvApi.as_view(),
         name="experiment-table-csv"),
    path("experiments/<int:experiment_id>/resume/", experiment_apis.ExperimentResumeApi.as_view(),
         name="experiment-resume"),
    path("experiments/<int:experiment_id>/cancel/", experiment_apis.ExperimentCancelApi.as_view(),
         name="experiment-cancel"),
    path("alignment-reports/", alignment_apis.AlignmentReportListApi.as_view(), name="alignment-report-list"),
    path("alignment-reports/<int:report_id>/", alignment_apis.AlignmentReportDetailApi.as_view(),
         name="alignment-report-detail"),
]
