from django.urls import path

from annotation import apis

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
]
