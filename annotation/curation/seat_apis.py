"""REST API of the managers' seat board: open items with their seats, holders and lease ages, and
the two hands on a seat (release, reassign), each recorded as a seat event."""
from __future__ import annotations

from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation.curation import selectors
from annotation.curation.services.seats import seat_reassign, seat_release
from annotation.models import SeatEvent, WorkItem
from common.pagination import Page, paginate
from common.params import id_field, query_filters
from common.roles import IsManager
from common.schema import PlainChoiceField

ERROR = OpenApiTypes.OBJECT  # {code, message, extra}


class SeatSerializer(serializers.Serializer):
    seat = serializers.IntegerField()
    holder = serializers.CharField(source="annotator.username")
    claimed_at = serializers.DateTimeField()
    lease_expires_at = serializers.DateTimeField()
    lease_age_s = serializers.SerializerMethodField(help_text="seconds since the seat was claimed")
    expired = serializers.SerializerMethodField(help_text="the lease ran out without a vote: any claim may take it")
    voted = serializers.SerializerMethodField(help_text="the holder's vote is in (its label is not shown)")

    def get_lease_age_s(self, seat) -> int:
        return int((self.context["now"] - seat.claimed_at).total_seconds())

    def get_expired(self, seat) -> bool:
        return seat.completed_at is None and seat.lease_expires_at <= self.context["now"]

    def get_voted(self, seat) -> bool:
        return seat.completed_at is not None


class SeatEventSerializer(serializers.ModelSerializer):
    holder = serializers.CharField(source="holder.username")
    by = serializers.CharField(source="by.username", allow_null=True, default=None)
    to = serializers.CharField(source="to.username", allow_null=True, default=None)

    class Meta:
        model = SeatEvent
        fields = ["id", "seat", "kind", "holder", "held_since", "by", "to", "reason", "at"]


class SeatItemSerializer(serializers.Serializer):
    item = serializers.IntegerField(source="pk")
    stage = serializers.CharField()
    state = serializers.CharField()
    video = serializers.IntegerField(source="video_id")
    panel_size = serializers.IntegerField()
    seats = SeatSerializer(many=True, source="assignments")
    events = SeatEventSerializer(many=True, source="seat_events", help_text="newest first")


class SeatBoardApi(APIView):
    permission_classes = [IsManager]
    pagination_class = Page

    class FilterSerializer(serializers.Serializer):
        stage = PlainChoiceField(choices=WorkItem.Stage.values, required=False)
        state = PlainChoiceField(choices=[WorkItem.State.OPEN, WorkItem.State.ADJUDICATE], required=False,
                                 help_text="open (the default) or adjudicate")
        item = id_field(required=False, help_text="one item, in whatever state")
        run = id_field(required=False, help_text="a proposal run's usability and duplicate items")
        holder = serializers.CharField(required=False, max_length=150, help_text="items with a seat of this username")

    @extend_schema(parameters=[FilterSerializer], responses={200: SeatItemSerializer(many=True), 400: ERROR, 403: ERROR},
                   summary="Items with their seats: holders, lease ages, expiry, votes in, and the seat events on "
                           "record")
    def get(self, request):
        f = query_filters(self.FilterSerializer, request)
        items = selectors.seat_board(stage=f.get("stage"), item_id=f.get("item"), run_id=f.get("run"),
                                     holder=f.get("holder"), states=(f.get("state", WorkItem.State.OPEN),))
        now = timezone.now()
        return paginate(items, lambda page, many: SeatItemSerializer(page, many=many, context={"now": now}),
                        request, self)


class SeatReleaseApi(APIView):
    permission_classes = [IsManager]

    class InputSerializer(serializers.Serializer):
        reason = serializers.CharField(max_length=200, required=False, allow_blank=True, default="",
                                       help_text="why (kept with the event)")

    @extend_schema(request=InputSerializer, responses={201: SeatEventSerializer, 400: ERROR, 403: ERROR, 404: ERROR,
                                                       409: ERROR},
                   summary="Free an unvoted seat of an open item (recorded); the next claim may take it")
    def post(self, request, item_id: int, seat: int):
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        event = seat_release(item_id=item_id, seat=seat, manager=request.user, **data.validated_data)
        return Response(SeatEventSerializer(event).data, status=status.HTTP_201_CREATED)


class SeatReassignApi(APIView):
    permission_classes = [IsManager]

    class InputSerializer(serializers.Serializer):
        to = serializers.CharField(max_length=150, help_text="the annotator's username")
        reason = serializers.CharField(max_length=200, required=False, allow_blank=True, default="",
                                       help_text="why (kept with the event)")

    @extend_schema(request=InputSerializer, responses={201: SeatEventSerializer, 400: ERROR, 403: ERROR, 404: ERROR,
                                                       409: ERROR},
                   summary="Give an unvoted seat of an open item to another annotator under a fresh lease (recorded)")
    def post(self, request, item_id: int, seat: int):
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        event = seat_reassign(item_id=item_id, seat=seat, manager=request.user, **data.validated_data)
        return Response(SeatEventSerializer(event).data, status=status.HTTP_201_CREATED)
