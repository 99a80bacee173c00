"""URLs of the annotation app: curation (review, adjudication, pools), benchmark construction and
releases. Paths and names are part of the API contract."""
from django.urls import path

from annotation.benchmark.apis import (
    descriptions,
    pseudolabels,
    queries,
    relations,
    snapshots,
    tube_captions,
)
from annotation.curation import apis as curation
from annotation.curation import search_apis as search
from annotation.curation import seat_apis as seats
from annotation.releases import apis as releases

urlpatterns = [
    path("review/items/", curation.ReviewItemsCreateApi.as_view(), name="review-items-create"),
    path("review/items/search/", search.WorkItemSearchApi.as_view(), name="review-item-search"),
    path("review/run-readiness/", search.RunReadinessApi.as_view(), name="review-run-readiness"),
    path("review/next/", curation.NextItemApi.as_view(), name="review-next"),
    path("review/items/<int:item_id>/", curation.ItemApi.as_view(), name="review-item"),
    path("review/items/<int:item_id>/overview/", search.WorkItemOverviewApi.as_view(), name="review-item-overview"),
    path("review/items/<int:item_id>/votes/", curation.VoteApi.as_view(), name="review-vote"),
    path("review/items/<int:item_id>/skip/", curation.SkipApi.as_view(), name="review-skip"),
    path("review/seats/", seats.SeatBoardApi.as_view(), name="review-seats"),
    path("review/items/<int:item_id>/seats/<int:seat>/release/", seats.SeatReleaseApi.as_view(), name="seat-release"),
    path("review/items/<int:item_id>/seats/<int:seat>/reassign/", seats.SeatReassignApi.as_view(),
         name="seat-reassign"),
    path("review/summary/", curation.ReviewSummaryApi.as_view(), name="review-summary"),
    path("review/agreement/", curation.AgreementApi.as_view(), name="review-agreement"),
    path("review/stages/", curation.ReviewStagesApi.as_view(), name="review-stages"),
    path("adjudication/", curation.AdjudicationQueueApi.as_view(), name="adjudication-queue"),
    path("adjudication/<int:item_id>/", curation.AdjudicationApi.as_view(), name="adjudication-item"),
    path("pools/", curation.PoolListApi.as_view(), name="pool-list"),
    path("pools/<int:pool_id>/", curation.PoolDetailApi.as_view(), name="pool-detail"),
    path("description-runs/", descriptions.DescriptionRunListApi.as_view(), name="description-run-list"),
    path("description-runs/<int:run_id>/", descriptions.DescriptionRunDetailApi.as_view(), name="description-run-detail"),
    path("descriptions/", descriptions.DescriptionListApi.as_view(), name="description-list"),
    path("descriptions/<int:description_id>/", descriptions.DescriptionDetailApi.as_view(), name="description-detail"),
    path("tube-match-reports/<int:report_id>/captions/", tube_captions.TubeCaptionsProposeApi.as_view(),
         name="tube-captions-propose"),
    path("generation-runs/", queries.GenerationRunListApi.as_view(), name="generation-run-list"),
    path("generation-runs/<int:run_id>/", queries.GenerationRunDetailApi.as_view(), name="generation-run-detail"),
    path("queries/", queries.QueryListApi.as_view(), name="query-list"),
    path("queries/<int:query_id>/", queries.QueryDetailApi.as_view(), name="query-detail"),
    path("queries/<int:query_id>/revise/", queries.QueryReviseApi.as_view(), name="query-revise"),
    path("relations/", relations.RelationListApi.as_view(), name="relation-list"),
    path("mining-runs/", relations.MiningRunListApi.as_view(), name="mining-run-list"),
    path("mining-runs/<int:run_id>/", relations.MiningRunDetailApi.as_view(), name="mining-run-detail"),
    path("cross-pairs/", relations.CrossPairListApi.as_view(), name="cross-pair-list"),
    path("completeness/", relations.CompletenessApi.as_view(), name="completeness"),
    path("completeness/queue/", relations.CompletenessQueueApi.as_view(), name="completeness-queue"),
    path("pseudo-rules/", pseudolabels.PseudoRuleListApi.as_view(), name="pseudo-rule-list"),
    path("pseudo-rules/<int:rule_id>/", pseudolabels.PseudoRuleDetailApi.as_view(), name="pseudo-rule-detail"),
    path("pseudo-rules/<int:rule_id>/calibrate/", pseudolabels.PseudoRuleCalibrateApi.as_view(),
         name="pseudo-rule-calibrate"),
    path("pseudo-rules/<int:rule_id>/calibration-sample/", pseudolabels.PseudoRuleCalibrationSampleApi.as_view(),
         name="pseudo-rule-calibration-sample"),
    path("pseudo-rules/<int:rule_id>/apply/", pseudolabels.PseudoRuleApplyApi.as_view(), name="pseudo-rule-apply"),
    path("snapshots/", snapshots.SnapshotListApi.as_view(), name="snapshot-list"),
    path("snapshots/<int:snapshot_id>/", snapshots.SnapshotDetailApi.as_view(), name="snapshot-detail"),
]


urlpatterns += [
    path("audits/", releases.AuditListApi.as_view(), name="audit-list"),
    path("audits/<int:audit_id>/", releases.AuditDetailApi.as_view(), name="audit-detail"),
    path("audits/<int:audit_id>/next/", releases.AuditNextApi.as_view(), name="audit-next"),
    path("audits/<int:audit_id>/judgments/", releases.AuditJudgmentApi.as_view(), name="audit-judgments"),
    path("audits/<int:audit_id>/stats/", releases.AuditStatsApi.as_view(), name="audit-stats"),
    path("audits/<int:audit_id>/samples/", releases.AuditSamplesApi.as_view(), name="audit-samples"),
    path("releases/", releases.ReleaseListApi.as_view(), name="release-list"),
    path("releases/preflight/", releases.ReleasePreflightApi.as_view(), name="release-preflight"),
    path("releases/<int:release_id>/", releases.ReleaseDetailApi.as_view(), name="release-detail"),
    path("releases/<int:release_id>/download/", releases.ReleaseDownloadApi.as_view(), name="release-download"),
    path("releases/<int:release_id>/SHA256SUMS", releases.ReleaseChecksumsApi.as_view(), name="release-checksums"),
    path("releases/<int:release_id>/diff/<int:other_id>/", releases.ReleaseDiffApi.as_view(), name="release-diff"),
    path("releases/<int:release_id>/verify/", releases.ReleaseVerifyApi.as_view(), name="release-verify"),
]
