"""REST API of curation: claim the next item, vote, adjudicate, the managers' summary, and pools."""
from __future__ import annotations

import numpy as np
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_field
from rest_framework import serializers, status
from rest_framework.permissions import IsAuthenticated
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation.benchmark.apis.descriptions import DissentOutputSerializer
from annotation.benchmark.selectors import item_dissent
from annotation.curation import selectors
from annotation.curation.services.agreement import agreement_stats
from annotation.curation.services.claims import (
    assignment_release,
    upcoming_token,
    upcoming_token_item,
    work_item_claim_next,
)
from annotation.curation.services.items import work_items_create_for_run
from annotation.curation.services.pools import pool_freeze
from annotation.curation.services.votes import adjudication_cast, vote_cast
from annotation.curation.stages import STAGE_NAMES, STAGES, stage_get
from annotation.curation.stages.description import DescriptionTargetSerializer
from annotation.curation.stages.pair import PairTargetSerializer
from annotation.curation.stages.relation import RelationRowTargetSerializer
from annotation.models import (
    ALL_LABELS,
    Assignment,
    CandidatePool,
    PoolMember,
    Vote,
    WorkItem,
)
from common.pagination import Page, paginate
from common.params import TIME_SPENT_MS_MAX, flag_field, int_param
from common.roles import IsManager, IsStaffMember, ManagerWritesStaffReads, Role, roles_required
from trajectories.models import ProposalRun

ERROR = OpenApiTypes.OBJECT  # {code, message, extra}
IsAnnotator = roles_required(Role.ANNOTATOR)
IsAdjudicator = roles_required(Role.ADJUDICATOR)


class TargetSerializer(serializers.Serializer):
    """What is being judged, without anything about other people's judgments.

    Items of the description, relation and pair stages also carry what their reviewer needs
    (``annotation.curation.selectors.review_target``, attached to the item as ``review_target``
    by the view); the other two fields are null.
    """
    # Each stage part is written out by its stage's ``target_serializer`` (``annotation.curation.stages``).

    video = serializers.IntegerField(source="video_id")
    trajectory = serializers.IntegerField(source="trajectory_id", allow_null=True)
    trajectory_a = serializers.SerializerMethodField()
    trajectory_b = serializers.SerializerMethodField()
    description = serializers.SerializerMethodField()
    relation_row = serializers.SerializerMethodField()
    pair = serializers.SerializerMethodField()

    def get_trajectory_a(self, item) -> int | None:
        return selectors.duplicate_ends(item)[0]

    def get_trajectory_b(self, item) -> int | None:
        return selectors.duplicate_ends(item)[1]

    @staticmethod
    def _part(item, stage_name: str):
        stage = stage_get(stage_name)
        part = (getattr(item, "review_target", None) or {}).get(stage.target_key)
        return None if part is None else stage.target_serializer(part).data

    @extend_schema_field(DescriptionTargetSerializer(allow_null=True))
    def get_description(self, item):
        return self._part(item, "description")

    @extend_schema_field(RelationRowTargetSerializer(allow_null=True))
    def get_relation_row(self, item):
        return self._part(item, "relation")

    @extend_schema_field(PairTargetSerializer(allow_null=True))
    def get_pair(self, item):
        return self._part(item, "pair")


def _with_review_target(item: WorkItem, viewer) -> WorkItem:
    item.review_target = selectors.review_target(item=item, viewer=viewer)
    return item


class OwnVoteSerializer(serializers.ModelSerializer):
    judgments = serializers.SerializerMethodField()

    class Meta:
        model = Vote
        fields = ["id", "label", "reasons", "time_spent_ms", "created_at", "correction", "payload", "judgments"]

    def get_judgments(self, vote) -> dict[str, int]:
        """One's own labels of a relation row's candidates ({trajectory id: 1 | 0 | -1})."""
        judgments = getattr(vote, "judgments_written", None)
        return {str(j.trajectory_id): j.label for j in (vote.judgments.all() if judgments is None else judgments)}


class UpcomingSerializer(serializers.Serializer):
    """The item a claim would likely give next (not reserved): enough to fetch its first frames."""

    item = serializers.IntegerField()
    stage = serializers.CharField()
    video = serializers.IntegerField()
    trajectories = serializers.ListField(child=serializers.IntegerField(),
                                         help_text="the trajectories its target shows (empty for a relation row)")
    token = serializers.CharField(help_text='send it back as "prefer" with your next claim (or vote with "next") '
                                            "to get this item while it is still claimable by you")


def prefer_field():
    return serializers.CharField(required=False, allow_blank=False, max_length=100,
                                 help_text='the "token" of the upcoming item you were given (and fetched ahead): '
                                           "it is claimed first while you may still take it")


def _preferred(request, data) -> int | None:
    """The item a request's ``prefer`` token names (400 for a token not given to this user)."""
    token = data.validated_data.get("prefer")
    return None if token is None else upcoming_token_item(annotator=request.user, token=token)


class AssignmentOutputSerializer(serializers.Serializer):
    """An annotator's view of an item: the target, the labels, their lease and their own vote."""

    item = serializers.IntegerField(source="item_id")
    stage = serializers.CharField(source="item.stage")
    labels = serializers.ListField(child=serializers.CharField(), source="item.labels")
    target = TargetSerializer(source="item")
    lease_expires_at = serializers.DateTimeField()
    my_vote = OwnVoteSerializer(allow_null=True)
    upcoming = UpcomingSerializer(allow_null=True, required=False, default=None,
                                  help_text="after a claim: the item likely to come next, for fetching ahead")


# The vote path's answers are written out by one instance of each serializer, its fields bound
# once: a new instance deep-copies its declared fields, nested ones included (a third of the
# serializers' time on that path). ``to_representation`` only reads them, in any thread.
_ASSIGNMENT_OUT = AssignmentOutputSerializer()
_OWN_VOTE_OUT = OwnVoteSerializer()


def _assignment_body(seat: Assignment) -> dict:
    # A vote completes its seat in the same transaction: an uncompleted seat has no vote to read.
    seat.my_vote = None if seat.completed_at is None else selectors.own_vote(annotator=seat.annotator,
                                                                             item_id=seat.item_id)
    upcoming = getattr(seat, "upcoming", None)  # set by a claim (selectors.upcoming_of)
    seat.upcoming = None if upcoming is None else {
        **upcoming, "token": upcoming_token(annotator=seat.annotator, item_id=upcoming["item"])}
    _with_review_target(seat.item, seat.annotator)
    return _ASSIGNMENT_OUT.to_representation(seat)


class NextItemApi(APIView):
    permission_classes = [IsAnnotator]

    class InputSerializer(serializers.Serializer):
        stage = serializers.ChoiceField(choices=WorkItem.Stage.choices, required=False)
        prefer = prefer_field()

    @extend_schema(request=InputSerializer, responses={200: AssignmentOutputSerializer,
                                                       204: OpenApiResponse(description="no work left")},
                   summary="Claim the next item (the same one again while its lease runs and it has no vote)")
    def post(self, request):
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        seat = work_item_claim_next(annotator=request.user, stage=data.validated_data.get("stage"),
                                    prefer=_preferred(request, data))
        if seat is None:
            return Response(status=status.HTTP_204_NO_CONTENT)
        return Response(_assignment_body(seat))


class ItemApi(APIView):
    permission_classes = [IsAnnotator]

    @extend_schema(responses=AssignmentOutputSerializer, summary="An item you hold a seat on")
    def get(self, request, item_id: int):
        return Response(_assignment_body(selectors.assignment_for_annotator(annotator=request.user, item_id=item_id)))

    @extend_schema(responses={204: None, 404: ERROR, 409: ERROR},
                   summary="Give back an item you have not voted on (skip); an item that is closed keeps its seats")
    def delete(self, request, item_id: int):
        assignment_release(assignment=selectors.assignment_for_annotator(annotator=request.user, item_id=item_id))
        return Response(status=status.HTTP_204_NO_CONTENT)


class NextOutputSerializer(serializers.Serializer):
    next = AssignmentOutputSerializer(allow_null=True, help_text="your next item of the same stage; null: no work left")


class SkipApi(APIView):
    permission_classes = [IsAnnotator]

    class InputSerializer(serializers.Serializer):
        reason = serializers.CharField(max_length=200, required=False, allow_blank=True, default="",
                                       help_text="why you skip it (kept with the seat's record)")
        prefer = prefer_field()

    @extend_schema(request=InputSerializer, responses={200: NextOutputSerializer, 400: ERROR, 403: ERROR, 404: ERROR,
                                                       409: ERROR},
                   summary="Skip an item you have not voted on, with a reason, and claim the next one; the skipped "
                           "item is not offered to you again for a while")
    def post(self, request, item_id: int):
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        prefer = _preferred(request, data)
        seat = selectors.assignment_for_annotator(annotator=request.user, item_id=item_id)
        assignment_release(assignment=seat, reason=data.validated_data["reason"])
        following = work_item_claim_next(annotator=request.user, stage=seat.item.stage,
                                         last_video_id=seat.item.video_id, prefer=prefer)
        return Response({"next": None if following is None else _assignment_body(following)})


class VoteApi(APIView):
    permission_classes = [IsAnnotator]

    class InputSerializer(serializers.Serializer):
        label = serializers.ChoiceField(choices=sorted(ALL_LABELS), help_text="one of the item's labels")
        reasons = serializers.ListField(child=serializers.CharField(max_length=200), required=False, default=list)
        time_spent_ms = serializers.IntegerField(required=False, allow_null=True, min_value=0,
                                                 max_value=TIME_SPENT_MS_MAX)
        client_request_id = serializers.UUIDField(required=False, allow_null=True,
                                                  help_text="repeat a submission with the same id safely")
        correction = serializers.DictField(required=False, allow_null=True,
                                           help_text="description items, usable_after_minor_correction: the "
                                                     "corrected appearance, motion and facts")
        payload = serializers.DictField(required=False, allow_null=True,
                                        help_text='relation items, first review: {"faithful": bool, "natural": 1-5}')
        judgments = serializers.DictField(child=serializers.IntegerField(), required=False, allow_null=True,
                                          help_text="relation items: {trajectory id: 1 | 0 | -1} for every "
                                                    "candidate shown")
        next = flag_field(required=False, default=False,
                                        help_text="answer with your next claimed item of the same stage as well "
                                                  "(one round trip instead of a vote and a claim)")
        prefer = prefer_field()

    class OutputSerializer(OwnVoteSerializer):
        next = AssignmentOutputSerializer(required=False, allow_null=True,
                                          help_text='only when asked for with "next": your next item (null: no '
                                                    "work left)")

        class Meta(OwnVoteSerializer.Meta):
            fields = [*OwnVoteSerializer.Meta.fields, "next"]

    @extend_schema(request=InputSerializer, responses={201: OutputSerializer, 200: OutputSerializer,
                                                       400: ERROR, 403: ERROR, 404: ERROR, 409: ERROR},
                   summary="Cast your vote (once; a retry with the same client_request_id returns it), and with "
                           '"next" claim your next item in the same request')
    def post(self, request, item_id: int):
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        fields = dict(data.validated_data)
        with_next = fields.pop("next")
        fields.pop("prefer", None)
        prefer = _preferred(request, data) if with_next else None
        vote, created = vote_cast(item_id=item_id, annotator=request.user, **fields)
        if created and not fields.get("judgments"):
            vote.judgments_written = ()  # a vote just cast without judgments has none to read back
        body = _OWN_VOTE_OUT.to_representation(vote)
        if with_next:
            following = work_item_claim_next(annotator=request.user, stage=vote.item.stage,
                                             last_video_id=vote.item.video_id, prefer=prefer)
            body["next"] = None if following is None else _assignment_body(following)
        return Response(body, status=status.HTTP_201_CREATED if created else status.HTTP_200_OK)


class AdjudicationVoteSerializer(serializers.ModelSerializer):
    annotator = serializers.CharField(source="annotator.username")
    judgments = serializers.SerializerMethodField()

    class Meta:
        model = Vote
        fields = ["id", "annotator", "label", "reasons", "comment", "is_adjudication", "time_spent_ms", "created_at",
                  "correction", "payload", "judgments"]

    def get_judgments(self, vote) -> dict[str, int]:
        """A relation row vote's labels of its candidates ({trajectory id: 1 | 0 | -1}); empty otherwise."""
        return {str(j.trajectory_id): j.label for j in vote.judgments.all()}


class AdjudicationItemSerializer(serializers.Serializer):
    item = serializers.IntegerField(source="pk")
    stage = serializers.CharField()
    labels = serializers.ListField(child=serializers.CharField())
    target = TargetSerializer(source="*")
    votes = AdjudicationVoteSerializer(many=True)
    dissent = DissentOutputSerializer(many=True, source="recorded_dissent",
                                      help_text="recorded dissent on the descriptions the decision reads: "
                                                "corrections that lost to the approvals of another version")


def _for_adjudication(item: WorkItem, viewer) -> WorkItem:
    item.recorded_dissent = item_dissent(item=item)
    return _with_review_target(item, viewer)


class AdjudicationQueueApi(APIView):
    permission_classes = [IsAdjudicator]

    @extend_schema(responses={200: AdjudicationItemSerializer(many=True), 403: ERROR},
                   summary="Items waiting for adjudication, with their votes")
    def get(self, request):
        items = [_for_adjudication(i, request.user) for i in selectors.adjudication_queue(user=request.user)[:100]]
        return Response(AdjudicationItemSerializer(items, many=True).data)


class AdjudicationApi(APIView):
    permission_classes = [IsAdjudicator]

    class InputSerializer(serializers.Serializer):
        label = serializers.ChoiceField(choices=sorted(ALL_LABELS), help_text="one of the item's decisive labels "
                                                                             "or uncertain")
        reason = serializers.CharField(max_length=2000)
        client_request_id = serializers.UUIDField(required=False, allow_null=True,
                                                  help_text="repeat a submission with the same id safely")
        judgments = serializers.DictField(child=serializers.IntegerField(), required=False, allow_null=True,
                                          help_text="relation rows (label reviewed): {trajectory id: 1 | 0 | -1} "
                                                    "for exactly the candidates in target.relation_row.bottom")

    @extend_schema(responses={200: AdjudicationItemSerializer, 403: ERROR, 404: ERROR},
                   summary="One item in adjudication, with its votes")
    def get(self, request, item_id: int):
        item = _for_adjudication(selectors.adjudication_item(user=request.user, item_id=item_id), request.user)
        return Response(AdjudicationItemSerializer(item).data)

    @extend_schema(request=InputSerializer, responses={201: AdjudicationVoteSerializer, 400: ERROR, 403: ERROR,
                                                       404: ERROR, 409: ERROR},
                   summary="Decide an item without a panel majority (recorded as a further vote with its reason)")
    def post(self, request, item_id: int):
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        vote = adjudication_cast(item_id=item_id, adjudicator=request.user, **data.validated_data)
        return Response(AdjudicationVoteSerializer(vote).data, status=status.HTTP_201_CREATED)


class ReviewSummaryApi(APIView):
    permission_classes = [IsManager]

    @extend_schema(responses=OpenApiTypes.OBJECT, summary="Items per stage and state, votes and adjudication rate")
    def get(self, request):
        return Response(selectors.review_summary())


class ReviewItemsCreateApi(APIView):
    permission_classes = [IsManager]

    class InputSerializer(serializers.Serializer):
        run = serializers.PrimaryKeyRelatedField(queryset=ProposalRun.objects.all())

    class OutputSerializer(serializers.Serializer):
        usability = serializers.IntegerField()
        identity = serializers.IntegerField()

    @extend_schema(request=InputSerializer, responses={201: OutputSerializer, 400: ERROR, 409: ERROR},
                   summary="Open review of a finished proposal run (usability and duplicate items; idempotent); 409 "
                           "while the run has not succeeded, or for a run whose tubes are not reviewed")
    def post(self, request):
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        counts = work_items_create_for_run(run=data.validated_data["run"])
        return Response(self.OutputSerializer(counts).data, status=status.HTTP_201_CREATED)


class PoolMemberOutputSerializer(serializers.ModelSerializer):
    frames = serializers.SerializerMethodField()
    boxes = serializers.SerializerMethodField()

    class Meta:
        model = PoolMember
        fields = ["trajectory", "role", "group_representative", "n_obs", "n_removed", "frames", "boxes"]

    def get_frames(self, obj) -> list[int]:
        return np.frombuffer(bytes(obj.frames), "<i4").tolist()

    def get_boxes(self, obj) -> list[list[float]]:
        return np.frombuffer(bytes(obj.boxes), "<f4").reshape(-1, 4).round(2).tolist()


class PoolOutputSerializer(serializers.ModelSerializer):
    class Meta:
        model = CandidatePool
        fields = ["id", "video", "version", "run", "supersedes", "reason", "n_members", "content_sha256", "frozen_at"]


class PoolDetailOutputSerializer(PoolOutputSerializer):
    members = PoolMemberOutputSerializer(many=True)

    class Meta(PoolOutputSerializer.Meta):
        fields = [*PoolOutputSerializer.Meta.fields, "lineage", "members"]


class PoolListApi(APIView):
    permission_classes = [ManagerWritesStaffReads]
    pagination_class = Page


    class InputSerializer(serializers.Serializer):
        run = serializers.PrimaryKeyRelatedField(queryset=ProposalRun.objects.all())
        reason = serializers.CharField(required=False, allow_blank=True, default="",
                                       help_text="required for a new version: the tracking defect it fixes")

    @extend_schema(responses=PoolOutputSerializer(many=True), summary="Frozen candidate pools (optionally ?video=)")
    def get(self, request):
        return paginate(selectors.pool_list(video_id=int_param(request, "video")), PoolOutputSerializer, request, self)

    @extend_schema(request=InputSerializer, responses={201: PoolOutputSerializer, 409: OpenApiTypes.OBJECT},
                   summary="Freeze the candidate pool of a reviewed proposal run")
    def post(self, request):
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        pool = pool_freeze(frozen_by=request.user, **data.validated_data)
        return Response(PoolOutputSerializer(pool).data, status=status.HTTP_201_CREATED)


class PoolDetailApi(APIView):
    permission_classes = [IsStaffMember]

    @extend_schema(responses=PoolDetailOutputSerializer, summary="One pool with its members' observations")
    def get(self, request, pool_id: int):
        return Response(PoolDetailOutputSerializer(selectors.pool_get(pool_id=pool_id)).data)


class AgreementApi(APIView):
    permission_classes = [IsManager]

    class InputSerializer(serializers.Serializer):
        stage = serializers.ChoiceField(choices=list(STAGE_NAMES), error_messages={
            "invalid_choice": f"\"{{input}}\" is not a review stage; use one of {', '.join(STAGE_NAMES)}"})
        split = serializers.ChoiceField(choices=["train", "dev", "test"], required=False)

    @extend_schema(parameters=[InputSerializer], responses=OpenApiTypes.OBJECT,
                   summary="Agreement of a stage: who saw each unit and what is measured (review); three-vote "
                           "panels: vote distributions, raw agreement, Fleiss' kappa, Krippendorff's alpha; "
                           "single-review stages: dispute rate and first labels against the blind audit with 95% "
                           "intervals; adjudication rate, time, per annotator")
    def get(self, request):
        data = self.InputSerializer(data=request.query_params)
        data.is_valid(raise_exception=True)
        return Response(agreement_stats(**data.validated_data))


class StageLabelSerializer(serializers.Serializer):
    value = serializers.CharField(help_text="the label the API stores")
    text = serializers.CharField(help_text="what a reviewer reads")


class StageOutputSerializer(serializers.Serializer):
    """One review stage as declared in ``annotation.curation.stages``."""

    stage = serializers.CharField(source="name")
    labels = StageLabelSerializer(many=True)
    decisive = serializers.ListField(child=serializers.CharField(), help_text="the labels that decide an item")
    reasons = serializers.ListField(child=serializers.CharField(), help_text="reasons a reviewer may tick")
    panel = serializers.IntegerField(help_text="seats an item opens with (the review policy's for the first three)")
    required = serializers.IntegerField(help_text="votes a decision needs")


class ReviewStagesApi(APIView):
    permission_classes = [IsAuthenticated]

    @extend_schema(responses=StageOutputSerializer(many=True),
                   summary="The review stages in pipeline order: labels, decisive labels, reasons, panel")
    def get(self, request):
        return Response(StageOutputSerializer(STAGES, many=True).data)
