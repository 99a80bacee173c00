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
    path("pseudo-rules/", relation_apis.PseudoRuleListApi.as_view(), name="pseudo-rule-list"),
    path("pseudo-rules/<int:rule_id>/", relation_apis.PseudoRuleDetailApi.as_view(), name="pseudo-rule-detail"),
    path("pseudo-rules/<int:rule_id>/calibrate/", relation_apis.PseudoRuleCalibrateApi.as_view(),
         name="pseudo-rule-calibrate"),
    path("pseudo-rules/<int:rule_id>/apply/", relation_apis.PseudoRuleApplyApi.as_view(), name="pseudo-rule-apply"),
    path("snapshots/", relation_apis.SnapshotListApi.as_view(), name="snapshot-list"),
    path("snapshots/<int:snapshot_id>/", relation_apis.SnapshotDetailApi.as_view(), name="snapshot-detail"),
]

from annotation import release_apis  # noqa: E402

urlpatterns += [
    path("audits/", release_apis.AuditListApi.as_view(), name="audit-list"),
    path("audits/<int:audit_id>/", release_apis.AuditDetailApi.as_view(), name="audit-detail"),
    path("audits/<int:audit_id>/next/", release_apis.AuditNextApi.as_view(), name="audit-next"),
    path("audits/<int:audit_id>/judgments/", release_apis.AuditJudgmentApi.as_view(), name="audit-judgments"),
    path("audits/<int:audit_id>/stats/", release_apis.AuditStatsApi.as_view(), name="audit-stats"),
    path("audits/<int:audit_id>/samples/", release_apis.AuditSamplesApi.as_view(), name="audit-samples"),
    path("releases/", release_apis.ReleaseListApi.as_view(), name="release-list"),
    path("releases/<int:release_id>/", release_apis.ReleaseDetailApi.as_view(), name="release-detail"),
    path("releases/<int:release_id>/diff/<int:other_id>/", release_apis.ReleaseDiffApi.as_view(), name="release-diff"),
    path("releases/<int:release_id>/verify/", release_apis.ReleaseVerifyApi.as_view(), name="release-verify"),
]
