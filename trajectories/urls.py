from django.urls import path

from trajectories import apis, import_apis

urlpatterns = [
    path("sources/", apis.SourceListApi.as_view(), name="source-list"),
    path("split-groups/", apis.SplitGroupListApi.as_view(), name="split-group-list"),
    path("split-groups/<int:group_id>/", apis.SplitGroupDetailApi.as_view(), name="split-group-detail"),
    path("splits/assign/", apis.SplitAssignApi.as_view(), name="split-assign"),
    path("videos/", apis.VideoListApi.as_view(), name="video-list"),
    path("videos/<int:video_id>/", apis.VideoDetailApi.as_view(), name="video-detail"),
    path("videos/<int:video_id>/frames/<int:index>.jpg", apis.VideoFrameApi.as_view(), name="video-frame"),
    path("videos/<int:video_id>/pool/", apis.VideoPoolApi.as_view(), name="video-pool"),
    path("proposal-configs/", apis.ProposalConfigListApi.as_view(), name="proposal-config-list"),
    path("proposal-runs/", apis.ProposalRunListApi.as_view(), name="proposal-run-list"),
    path("proposal-runs/<int:run_id>/", apis.ProposalRunDetailApi.as_view(), name="proposal-run-detail"),
    path("trajectories/", apis.TrajectoryListApi.as_view(), name="trajectory-list"),
    path("trajectories/<int:trajectory_id>/", apis.TrajectoryDetailApi.as_view(), name="trajectory-detail"),
    path("trajectories/<int:trajectory_id>/crops/", apis.TrajectoryCropListApi.as_view(), name="trajectory-crops"),
    path("trajectories/<int:trajectory_id>/crops/<int:index>.jpg", apis.TrajectoryCropApi.as_view(), name="trajectory-crop"),
    path("trajectories/<int:trajectory_id>/marked/<int:index>.jpg", apis.TrajectoryMarkedFrameApi.as_view(),
         name="trajectory-marked-frame"),
    path("duplicate-candidates/", apis.DuplicateCandidateListApi.as_view(), name="duplicate-candidate-list"),
    path("track-imports/", import_apis.TrackImportListApi.as_view(), name="track-import-list"),
    path("track-imports/check/", import_apis.TrackFileCheckApi.as_view(), name="track-file-check"),
    path("track-imports/<int:import_id>/", import_apis.TrackImportDetailApi.as_view(), name="track-import-detail"),
    path("tube-match-reports/", import_apis.TubeMatchReportListApi.as_view(), name="tube-match-report-list"),
    path("tube-match-reports/<int:report_id>/", import_apis.TubeMatchReportDetailApi.as_view(),
         name="tube-match-report-detail"),
    path("clean-truth-tubes/", import_apis.CleanTruthTubeListApi.as_view(), name="clean-truth-tube-list"),
]
