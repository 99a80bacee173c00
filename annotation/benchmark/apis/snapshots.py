"""REST API of sealed relation snapshots (DESIGN 2.10); there is no endpoint that edits one."""
from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation.benchmark import selectors
from annotation.benchmark.apis.common import (
    ERROR,
    ManagerWritesApi,
)
from annotation.benchmark.services.mining import (
    SPLITS,
)
from annotation.benchmark.services.snapshots import relation_snapshot_create
from annotation.models import (
    RelationSnapshot,
)
from common.pagination import Page, paginate
from common.params import flag_field, query_filters, text_field
from common.reach import RelativePathField
from common.roles import IsStaffMember
from common.schema import PlainChoiceField


# -- snapshots -----------------------------------------------------------------------------------------
class SnapshotOutputSerializer(serializers.ModelSerializer):
    path = RelativePathField()
    class Meta:
        model = RelationSnapshot
        fields = ["id", "split", "name", "content_sha256", "path", "pool_versions", "counts", "complete",
                  "sealed_at", "created_by", "created_at"]


class SnapshotDetailOutputSerializer(SnapshotOutputSerializer):
    n_relations = serializers.IntegerField()

    class Meta(SnapshotOutputSerializer.Meta):
        fields = [*SnapshotOutputSerializer.Meta.fields, "n_relations"]


class SnapshotListApi(ManagerWritesApi):
    pagination_class = Page

    class FilterSerializer(serializers.Serializer):
        split = serializers.ChoiceField(choices=SPLITS, required=False)

    class InputSerializer(serializers.Serializer):
        split = PlainChoiceField(choices=SPLITS)
        name = text_field(max_length=100, required=False, allow_blank=True, default="")
        allow_incomplete = flag_field(required=False, default=False,
                                                    help_text="take a dev/test snapshot that misses binary relations "
                                                              "(it is marked incomplete)")

    @extend_schema(parameters=[FilterSerializer], responses=SnapshotOutputSerializer(many=True),
                   summary="Relation snapshots (immutable)")
    def get(self, request):
        f = query_filters(self.FilterSerializer, request)
        return paginate(selectors.snapshot_list(split=f.get("split")), SnapshotOutputSerializer, request, self)

    @extend_schema(request=InputSerializer, responses={201: SnapshotOutputSerializer, 400: ERROR, 409: ERROR},
                   summary="Take an immutable, hashed snapshot of a split's verified relations (409 "
                           "incomplete_split with the completeness report when a dev/test split misses some)")
    def post(self, request):
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        snapshot = relation_snapshot_create(created_by=request.user, **data.validated_data)
        return Response(SnapshotOutputSerializer(snapshot).data, status=status.HTTP_201_CREATED)


class SnapshotDetailApi(APIView):
    """Read only: a snapshot is never edited (PUT, PATCH and DELETE answer 405)."""

    permission_classes = [IsStaffMember]

    @extend_schema(responses=SnapshotDetailOutputSerializer,
                   summary="One snapshot: counts, pool versions, hash, folder and completeness")
    def get(self, request, snapshot_id: int):
        return Response(SnapshotDetailOutputSerializer(selectors.snapshot_get(snapshot_id=snapshot_id)).data)
