from django.urls import path

from common.jobs import apis

urlpatterns = [
    path("jobs/", apis.JobListApi.as_view(), name="job-list"),
    path("jobs/<int:job_id>/", apis.JobDetailApi.as_view(), name="job-detail"),
    path("jobs/<int:job_id>/cancel/", apis.JobCancelApi.as_view(), name="job-cancel"),
    path("jobs/<int:job_id>/retry/", apis.JobRetryApi.as_view(), name="job-retry"),
]
