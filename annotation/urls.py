from django.urls import path

from annotation import apis, relation_apis

urlpatterns = [
    path("review/items/", apis.ReviewItemsCreateApi.as_view(), name="review-items-create"),
    path("review/next/", apis.NextItemApi.as_view(), name="review-next"),
    path("review/items/<int:item_id>/", apis.ItemApi.as_view(), name="review-item"),
    path("review/items/<int:item_id>/votes/", apis.VoteApi.as_view(), name="review-vote"),
    path("review/summary/", apis.ReviewSummaryApi.as_view(), name="review-summary"),
    path("review/agreement/", apis.AgreementApi.as_view(), name="review-agreement"),
    path("adjudication/", apis.AdjudicationQueueApi.as_view(), name="adjudication-queue"),
    path("adjudication/<int:item_id>/", apis.AdjudicationApi.as_view(), name="adjudication-item"),
    path("pools/", apis.PoolListApi.as_view(), name="pool-list"),
    path("pools/<int:pool_id>/", apis.PoolDetailApi.as_view(), name="pool-detail"),
    path("description-runs/", relation_apis.DescriptionRunListApi.as_view(), name="description-run-list"),
    path("description-runs/<int:run_id>/", relation_apis.DescriptionRunDetailApi.as_view(), name="description-run-detail"),
    path("descriptions/", relation_apis.DescriptionListApi.as_view(), name="description-list"),
    path("descriptions/<int:description_id>/", relation_apis.DescriptionDetailApi.as_view(), name="description-detail"),
    path("generation-runs/", relation_apis.GenerationRunListApi.as_view(), name="generation-run-list"),
    path("generation-runs/<int:run_id>/", relation_apis.GenerationRunDetailApi.as_view(), name="generation-run-detail"),
    path("queries/", relation_apis.QueryListApi.as_view(), name="query-list"),
    path("queries/<int:query_id>/", relation_apis.QueryDetailApi.as_view(), name="query-detail"),
    path("queries/<int:query_id>/revise/", relation_apis.QueryReviseApi.as_view(), name="query-revise"),
    path("relations/", relation_apis.RelationListApi.as_view(), name="relation-list"),
    path("mining-runs/", relation_apis.MiningRunListApi.as_view(), name="mining-run-list"),
    path("mining-runs/<int:run_id>/", relation_apis.MiningRunDetailApi.as_view(), name="mining-run-detail"),
    path("cross-pairs/", relation_apis.CrossPairListApi.as_view(), name="cross-pair-list"),
    path("completeness/", relation_apis.CompletenessApi.as_view(), name="completeness"),
    path("completeness/queue/", relation_apis.CompletenessQueueApi.as_view(), name="completeness-queue"),
    path("snapshots/", relation_apis.SnapshotListApi.as_view(), name="snapshot-list"),
    path("snapshots/<int:snapshot_id>/", relation_apis.SnapshotDetailApi.as_view(), name="snapshot-detail"),
]
