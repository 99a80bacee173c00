from django.urls import path

from workers import apis

urlpatterns = [
    path("jobs/", apis.JobListApi.as_view(), name="job-list"),
    path("jobs/<int:job_id>/", apis.JobDetailApi.as_view(), name="job-detail"),
]
