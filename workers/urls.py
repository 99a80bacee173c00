from django.urls import path

from workers import apis

urlpatterns = [
    path("training-runs/", apis.TrainingRunListApi.as_view(), name="training-run-list"),
    path("training-runs/<int:run_id>/", apis.TrainingRunDetailApi.as_view(), name="training-run-detail"),
    path("training-runs/<int:run_id>/cancel/", apis.TrainingRunCancelApi.as_view(), name="training-run-cancel"),
    path("evaluation-runs/", apis.EvaluationRunListApi.as_view(), name="evaluation-run-list"),
    path("evaluation-runs/<int:run_id>/", apis.EvaluationRunDetailApi.as_view(), name="evaluation-run-detail"),
    path("search/", apis.SearchApi.as_view(), name="search"),
]
