"""REST API of audits and releases (DESIGN 2.11).

Managers start audits and read their statistics and samples; auditors claim the next sample of an
audit and record their verdict, seeing only the record as accepted (``annotation.releases.selectors``).
Managers publish releases; every staff member reads them and their diffs. Releases are immutable:
there is no endpoint that edits or deletes one (PUT, PATCH and DELETE answer 405).
"""
from __future__ import annotations

from django.http import HttpResponse, StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation.benchmark.apis.descriptions import DissentOutputSerializer
from annotation.benchmark.selectors import description_dissent_list
from annotation.benchmark.services.mining import SPLITS
from annotation.models import Audit, AuditJudgment, AuditSample, Release
from annotation.models.releases import (
    ALL_ERROR_TYPES,
    AUDIT_ERROR_TYPES,
    AUDIT_KINDS,
    AUDIT_VERDICTS,
)
from annotation.releases import selectors
from annotation.releases.services.audits import (
    MAX_SAMPLE,
    audit_create,
    audit_judgment_record,
    audit_sample_claim_next,
    audit_stats,
)
from annotation.releases.services.downloads import release_archive, release_checksums
from annotation.releases.services.releases import (
    DEFAULT_LICENSE,
    release_create,
    release_diff,
    release_preflight,
    release_verify,
)
from common.pagination import Page, paginate
from common.params import (
    LEASE_SECONDS_MAX,
    TIME_SPENT_MS_MAX,
    flag_field,
    query_filters,
    seed_field,
)
from common.reach import RelativePathField
from common.roles import (
    IsManager,
    IsStaffMember,
    ManagerWritesStaffReads,
    Role,
    roles_required,
    writes_need,
)
from common.schema import PlainChoiceField

ERROR = OpenApiTypes.OBJECT  # {code, message, extra}
IsAuditor = roles_required(Role.AUDITOR)
IsManagerOrAuditor = roles_required(Role.MANAGER, Role.AUDITOR)
MAX_DIFF_RECORDS = 10_000


# -- audits ----------------------------------------------------------------------------------------
class AuditOutputSerializer(serializers.ModelSerializer):
    n_samples = serializers.IntegerField(help_text="records sampled")
    n_judged = serializers.IntegerField(help_text="records with a verdict")

    class Meta:
        model = Audit
        fields = ["id", "split", "kinds", "n_random", "n_difficult", "seed", "population", "lease_seconds",
                  "n_samples", "n_judged", "created_by", "created_at"]


class AuditTargetSerializer(serializers.Serializer):
    """What an auditor checks: the record as accepted, nothing about how it was decided."""

    sample = serializers.IntegerField()
    audit = serializers.IntegerField()
    kind = serializers.CharField(help_text="relation, query or description")
    claim_expires_at = serializers.DateTimeField()
    record = serializers.JSONField(help_text="relation: query, text, predicates, trajectory, videos, label; query: "
                                             "text, predicates, target; description: the approved content")
    error_types = serializers.ListField(child=serializers.CharField(), help_text="what an error on this kind may be")


class AuditJudgmentOutputSerializer(serializers.ModelSerializer):
    dissent = DissentOutputSerializer(many=True, source="revealed_dissent",
                                      help_text="a description sample: its recorded dissent (corrections that lost to "
                                                "the approvals of another version), shown once the blind verdict is in; "
                                                "empty for other kinds")

    class Meta:
        model = AuditJudgment
        fields = ["id", "sample", "verdict", "error_type", "note", "time_spent_ms", "created_at", "dissent"]


class AuditSampleOutputSerializer(serializers.ModelSerializer):
    """A sample as a manager sees it: stratum, reasons, the record and its verdict."""

    verdict = serializers.CharField(source="judgment.verdict", allow_null=True, default=None)
    error_type = serializers.CharField(source="judgment.error_type", allow_null=True, default=None)
    note = serializers.CharField(source="judgment.note", allow_null=True, default=None)
    auditor = serializers.CharField(source="judgment.auditor.username", allow_null=True, default=None)

    class Meta:
        model = AuditSample
        fields = ["id", "position", "stratum", "kind", "relation", "query", "description", "recorded", "reasons",
                  "verdict", "error_type", "note", "auditor"]


class AuditListApi(APIView):
    permission_classes = [writes_need(IsManager, IsManagerOrAuditor)]
    pagination_class = Page


    class FilterSerializer(serializers.Serializer):
        split = serializers.ChoiceField(choices=SPLITS, required=False)

    class InputSerializer(serializers.Serializer):
        split = PlainChoiceField(choices=SPLITS)
        n_random = serializers.IntegerField(min_value=0, max_value=MAX_SAMPLE, default=50,
                                            help_text="accepted records drawn uniformly, per kind")
        n_difficult = serializers.IntegerField(min_value=0, max_value=MAX_SAMPLE, default=20,
                                               help_text="disputed, adjudicated or low-agreement records, per kind")
        seed = seed_field(default=0)
        kinds = serializers.ListField(child=PlainChoiceField(choices=AUDIT_KINDS), required=False, allow_empty=False)
        lease_seconds = serializers.IntegerField(min_value=10, max_value=LEASE_SECONDS_MAX, default=900,
                                                 help_text="how long a claimed sample stays reserved")

    @extend_schema(parameters=[FilterSerializer], responses=AuditOutputSerializer(many=True),
                   summary="Audits of accepted records (managers and auditors)")
    def get(self, request):
        f = query_filters(self.FilterSerializer, request)
        return paginate(selectors.audit_list(split=f.get("split")), AuditOutputSerializer, request, self)

    @extend_schema(request=InputSerializer, responses={201: AuditOutputSerializer, 400: ERROR, 409: ERROR},
                   summary="Sample an audit of a split: random accepted records and, apart, difficult cases "
                           "(seeded)")
    def post(self, request):
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        audit = audit_create(created_by=request.user, **data.validated_data)
        return Response(AuditOutputSerializer(selectors.audit_get(audit_id=audit.pk)).data,
                        status=status.HTTP_201_CREATED)


class AuditDetailApi(APIView):
    permission_classes = [IsManagerOrAuditor]

    @extend_schema(responses=AuditOutputSerializer, summary="One audit: sizes, seed, population, progress")
    def get(self, request, audit_id: int):
        return Response(AuditOutputSerializer(selectors.audit_get(audit_id=audit_id)).data)


class AuditNextApi(APIView):
    permission_classes = [IsAuditor]

    @extend_schema(request=None, responses={200: AuditTargetSerializer, 204: OpenApiResponse(description="nothing left")},
                   summary="Claim the next sample to audit (the same one again while the claim runs)")
    def post(self, request, audit_id: int):
        sample = audit_sample_claim_next(audit=selectors.audit_get(audit_id=audit_id), auditor=request.user)
        if sample is None:
            return Response(status=status.HTTP_204_NO_CONTENT)
        body = selectors.audit_sample_target(sample) | {"error_types": list(AUDIT_ERROR_TYPES[sample.kind])}
        return Response(AuditTargetSerializer(body).data)


class AuditJudgmentApi(APIView):
    permission_classes = [IsAuditor]

    class InputSerializer(serializers.Serializer):
        sample = serializers.IntegerField(help_text="a sample you claimed")
        verdict = PlainChoiceField(choices=AUDIT_VERDICTS)
        error_type = serializers.ChoiceField(choices=["", *ALL_ERROR_TYPES], required=False, default="",
                                             help_text="required with an error: one of the sample's error_types")
        note = serializers.CharField(required=False, allow_blank=True, default="", max_length=2000)
        time_spent_ms = serializers.IntegerField(required=False, allow_null=True, min_value=0,
                                                 max_value=TIME_SPENT_MS_MAX)

    @extend_schema(request=InputSerializer, responses={201: AuditJudgmentOutputSerializer, 400: ERROR, 403: ERROR,
                                                       404: ERROR, 409: ERROR},
                   summary="Record your verdict on a claimed sample: correct, or error with its type (never changed); "
                           "a description's recorded dissent comes back with it")
    def post(self, request, audit_id: int):
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        values = dict(data.validated_data)
        audit = selectors.audit_get(audit_id=audit_id)
        sample = selectors.audit_sample_get(audit=audit, sample_id=values.pop("sample"))
        judgment = audit_judgment_record(sample=sample, auditor=request.user, **values)
        judgment.revealed_dissent = (description_dissent_list(description_ids=[sample.description_id])
                                     if sample.description_id else [])
        return Response(AuditJudgmentOutputSerializer(judgment).data, status=status.HTTP_201_CREATED)


class AuditStatsApi(APIView):
    permission_classes = [IsManager]

    @extend_schema(responses=OpenApiTypes.OBJECT,
                   summary="Audit statistics per kind: the random stratum's error rate with exact 95% intervals and "
                           "the residual errors it implies; difficult cases apart; errors by type")
    def get(self, request, audit_id: int):
        return Response(audit_stats(audit=selectors.audit_get(audit_id=audit_id)))


class AuditSamplesApi(APIView):
    permission_classes = [IsManager]
    pagination_class = Page


    @extend_schema(responses=AuditSampleOutputSerializer(many=True),
                   summary="Every sample of an audit with its stratum, reasons and verdict (managers)")
    def get(self, request, audit_id: int):
        audit = selectors.audit_get(audit_id=audit_id)
        return paginate(selectors.audit_samples(audit=audit), AuditSampleOutputSerializer, request, self)


# -- releases --------------------------------------------------------------------------------------
class ReleaseFileOutputSerializer(serializers.Serializer):
    path = serializers.CharField()
    sha256 = serializers.CharField()
    size_bytes = serializers.IntegerField()
    rows = serializers.IntegerField(allow_null=True)


class UnfinishedAuditSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    split = serializers.CharField()
    n_samples = serializers.IntegerField()
    n_judged = serializers.IntegerField()


class ReleaseOutputSerializer(serializers.ModelSerializer):
    path = RelativePathField()
    unfinished_audits = UnfinishedAuditSerializer(many=True, allow_null=True, read_only=True,
                                                  help_text="audits still unfinished when it was published anyway "
                                                            "(null: none)")
    origin = PlainChoiceField(choices=Release.Origin.choices, read_only=True,
                              help_text="exported here, or imported from a release folder")

    class Meta:
        model = Release
        fields = ["id", "name", "version", "description", "license", "splits", "parent", "parent_ref", "origin",
                  "media_included", "path", "manifest_sha256", "counts", "changes", "unfinished_audits", "sealed_at",
                  "created_by", "created_at"]


class ReleaseDetailOutputSerializer(ReleaseOutputSerializer):
    files = ReleaseFileOutputSerializer(many=True)

    class Meta(ReleaseOutputSerializer.Meta):
        fields = [*ReleaseOutputSerializer.Meta.fields, "config", "stats", "files"]


class ReleaseListApi(APIView):
    permission_classes = [ManagerWritesStaffReads]
    pagination_class = Page


    class FilterSerializer(serializers.Serializer):
        name = serializers.CharField(required=False, max_length=100)

    class InputSerializer(serializers.Serializer):
        name = serializers.CharField(max_length=100)
        version = serializers.CharField(max_length=32, help_text="MAJOR.MINOR.PATCH, after the parent's")
        splits = serializers.ListField(child=PlainChoiceField(choices=SPLITS), allow_empty=False)
        parent = serializers.PrimaryKeyRelatedField(queryset=Release.objects.filter(sealed_at__isnull=False),
                                                    required=False, allow_null=True,
                                                    help_text="default: the latest release of the same name")
        description = serializers.CharField(required=False, allow_blank=True, default="", max_length=5000)
        license = serializers.CharField(required=False, default=DEFAULT_LICENSE, max_length=200)
        include_media = flag_field(required=False, default=False,
                                                 help_text="copy the video files into the release")
        publish_anyway = flag_field(required=False, default=False,
                                                  help_text="publish although an audit of a released split is "
                                                            "unfinished (the release records those audits)")

    @extend_schema(parameters=[FilterSerializer], responses=ReleaseOutputSerializer(many=True),
                   summary="Published releases (immutable)")
    def get(self, request):
        f = query_filters(self.FilterSerializer, request)
        return paginate(selectors.release_list(name=f.get("name")), ReleaseOutputSerializer, request, self)

    @extend_schema(request=InputSerializer, responses={201: ReleaseOutputSerializer, 400: ERROR, 409: ERROR},
                   summary="Publish an immutable, versioned release of splits (409 incomplete_split with the missing "
                           "relations of a dev/test split; 409 audit_unfinished without publish_anyway; 409 "
                           "release_exists for a published version)")
    def post(self, request):
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        release = release_create(created_by=request.user, **data.validated_data)
        return Response(ReleaseOutputSerializer(release).data, status=status.HTTP_201_CREATED)


class ReleasePreflightApi(APIView):
    permission_classes = [IsManager]

    class FilterSerializer(serializers.Serializer):
        splits = serializers.MultipleChoiceField(choices=SPLITS, help_text="repeat the parameter: splits=dev&splits=test")
        name = serializers.CharField(required=False, max_length=100, help_text="the release's name (for its parent)")

    class OutputSerializer(serializers.Serializer):
        splits = serializers.ListField(child=serializers.CharField())
        videos = serializers.IntegerField(help_text="benchmark videos the release would hold")
        incomplete = serializers.DictField(child=serializers.DictField(),
                                           help_text="{split: completeness report} of dev/test splits that miss "
                                                     "relations (publishing is refused)")
        unfinished_audits = serializers.ListField(child=UnfinishedAuditSerializer(),
                                                  help_text="audits with unjudged samples (publish anyway, recorded)")
        parent = serializers.DictField(allow_null=True, help_text="{id, name, version} of the latest release of name")

    @extend_schema(parameters=[FilterSerializer], responses={200: OutputSerializer, 400: ERROR},
                   summary="What publishing these splits would meet (nothing is written): missing relations, "
                           "unfinished audits, the parent")
    def get(self, request):
        f = self.FilterSerializer(data={"splits": request.query_params.getlist("splits"),
                                        **({"name": request.query_params["name"]} if "name" in request.query_params
                                           else {})})
        f.is_valid(raise_exception=True)
        out = release_preflight(splits=sorted(f.validated_data["splits"], key=SPLITS.index),
                                name=f.validated_data.get("name"))
        return Response(self.OutputSerializer(out).data)


class ReleaseDetailApi(APIView):
    """Read only: a release is never edited or deleted (PUT, PATCH and DELETE answer 405)."""

    permission_classes = [IsStaffMember]

    @extend_schema(responses=ReleaseDetailOutputSerializer,
                   summary="One release: files with SHA-256, counts, construction config, audit statistics, changes")
    def get(self, request, release_id: int):
        return Response(ReleaseDetailOutputSerializer(selectors.release_get(release_id=release_id)).data)


class ReleaseDiffApi(APIView):
    """Managers and auditors only: a diff lists published labels, which a reviewer seated on a
    revision of a published query may not read (``annotation.curation.stages.seated_blind``)."""

    permission_classes = [IsManagerOrAuditor]

    class FilterSerializer(serializers.Serializer):
        limit = serializers.IntegerField(required=False, min_value=0, max_value=MAX_DIFF_RECORDS, default=100,
                                         help_text="how many changed records to list")

    class OutputSerializer(serializers.Serializer):
        old = serializers.DictField()
        new = serializers.DictField()
        tables = serializers.DictField(child=serializers.DictField(child=serializers.IntegerField()),
                                       help_text="{table: {added, removed, changed}}")
        records = serializers.ListField(child=serializers.DictField(), help_text="[{table, key, change}] in order")
        total = serializers.IntegerField()
        truncated = serializers.BooleanField()

    @extend_schema(parameters=[FilterSerializer], responses={200: OutputSerializer, 409: ERROR},
                   summary="Records added, removed and changed from this release to another")
    def get(self, request, release_id: int, other_id: int):
        f = query_filters(self.FilterSerializer, request)
        diff = release_diff(old=selectors.release_get(release_id=release_id),
                            new=selectors.release_get(release_id=other_id), limit=f.get("limit", 100))
        return Response(self.OutputSerializer(diff).data)


class ReleaseVerifyApi(APIView):
    permission_classes = [IsManager]

    class OutputSerializer(serializers.Serializer):
        ok = serializers.BooleanField()
        problems = serializers.ListField(child=serializers.CharField())

    @extend_schema(responses={200: OutputSerializer, 404: ERROR},
                   summary="Check the release's folder against its published checksums")
    def get(self, request, release_id: int):
        problems = release_verify(release=selectors.release_get(release_id=release_id))
        return Response(self.OutputSerializer({"ok": not problems, "problems": problems}).data)


class ReleaseDownloadApi(APIView):
    """Managers and auditors only, like the diff: the files hold published labels, which a reviewer
    seated on a revision of a published query may not read (``annotation.curation.stages.seated_blind``)."""

    permission_classes = [IsManagerOrAuditor]

    @extend_schema(responses={(200, "application/x-tar"): OpenApiTypes.BINARY, 404: ERROR, 409: ERROR},
                   summary="The release as one .tar (streamed): every file under <name>-<version>/, SHA256SUMS "
                           "among them; 409 release_tampered when a file on disk is missing or resized")
    def get(self, request, release_id: int):
        archive = release_archive(release=selectors.release_get(release_id=release_id))
        response = StreamingHttpResponse(archive.chunks, content_type="application/x-tar")
        response["Content-Length"] = str(archive.length)
        response["Content-Disposition"] = f'attachment; filename="{archive.filename}"'
        response["X-Manifest-SHA256"] = archive.manifest_sha256
        return response


class ReleaseChecksumsApi(APIView):
    permission_classes = [IsStaffMember]

    @extend_schema(responses={(200, "text/plain"): OpenApiTypes.STR, 404: ERROR, 409: ERROR},
                   summary="The release's SHA256SUMS (its SHA-256 is the release's manifest_sha256)")
    def get(self, request, release_id: int):
        release = selectors.release_get(release_id=release_id)
        response = HttpResponse(release_checksums(release=release), content_type="text/plain; charset=utf-8")
        response["Content-Disposition"] = f'attachment; filename="{release.name}-{release.version}.SHA256SUMS"'
        return response
