"""REST API of pseudo-label rules: declare, calibrate, apply (DESIGN 2.9)."""
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
from annotation.benchmark.services.pseudolabels import (
    MAX_CALIBRATION_SAMPLE,
    pseudo_calibration_sample_queue,
    pseudo_labels_apply,
    pseudo_rule_calibrate,
    pseudo_rule_declare,
)
from annotation.models import (
    PseudoLabelRule,
)
from common.pagination import Page, paginate
from common.roles import IsManager, IsStaffMember


# -- pseudo-label rules ------------------------------------------------------------------------------
class PseudoRuleOutputSerializer(serializers.ModelSerializer):
    class Meta:
        model = PseudoLabelRule
        fields = ["id", "name", "rule", "rule_sha256", "declared_bound", "calibration", "calibrated_at", "accepted",
                  "created_by", "created_at"]


class PseudoRuleListApi(ManagerWritesApi):
    pagination_class = Page

    class InputSerializer(serializers.Serializer):
        rule = serializers.DictField(help_text="models.curation.calibration.EasyNegativeRule: name, s_max, encoder, "
                                               "min_contradicted, strata, event_absence")
        declared_bound = serializers.FloatField(help_text="the largest acceptable error rate, declared before the "
                                                          "audit, in (0, 1)")

    @extend_schema(responses=PseudoRuleOutputSerializer(many=True), summary="Pseudo-label rules for easy negatives")
    def get(self, request):
        return paginate(selectors.pseudo_rule_list(), PseudoRuleOutputSerializer, request, self)

    @extend_schema(request=InputSerializer, responses={201: PseudoRuleOutputSerializer, 400: ERROR, 409: ERROR},
                   summary="Freeze a pseudo-label rule with its declared error bound (rules are never changed)")
    def post(self, request):
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        rule = pseudo_rule_declare(created_by=request.user, **data.validated_data)
        return Response(PseudoRuleOutputSerializer(rule).data, status=status.HTTP_201_CREATED)


class PseudoRuleDetailApi(APIView):
    permission_classes = [IsStaffMember]

    @extend_schema(responses=PseudoRuleOutputSerializer, summary="One pseudo-label rule with its calibration")
    def get(self, request, rule_id: int):
        return Response(PseudoRuleOutputSerializer(selectors.pseudo_rule_get(rule_id=rule_id)).data)


class PseudoRuleCalibrationSampleApi(APIView):
    permission_classes = [IsManager]

    class InputSerializer(serializers.Serializer):
        size = serializers.IntegerField(required=False, min_value=1, max_value=MAX_CALIBRATION_SAMPLE,
                                        help_text="pairs to open; default: the smallest audit that can accept the "
                                                  "declared bound")
        seed = serializers.IntegerField(required=False, default=0, min_value=0, help_text="seeds the uniform draw")

    class OutputSerializer(serializers.Serializer):
        considered = serializers.IntegerField(help_text="dev pairs scored by the rule's encoder")
        selected = serializers.IntegerField(help_text="of them, selected by the rule")
        eligible = serializers.IntegerField(help_text="selected pairs with no review item and no label yet")
        queued = serializers.IntegerField(help_text="blind pair items opened now (no proposal shown)")
        blinded = serializers.IntegerField(help_text="selected pairs that already carry a blinded label")
        needed = serializers.IntegerField(help_text="blinded pairs the declared bound needs at the least")
        other_encoder = serializers.IntegerField(help_text="dev pairs of another encoder, not read")

    @extend_schema(request=InputSerializer, responses={200: OutputSerializer, 400: ERROR, 404: ERROR, 409: ERROR},
                   summary="Open blind pair review (no proposal shown) for a uniform sample of the unreviewed dev "
                           "pairs the rule selects: the sample its calibration reads")
    def post(self, request, rule_id: int):
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        counts = pseudo_calibration_sample_queue(rule_row=selectors.pseudo_rule_get(rule_id=rule_id),
                                                 **data.validated_data)
        return Response(self.OutputSerializer(counts).data)


class PseudoRuleCalibrateApi(APIView):
    permission_classes = [IsManager]

    @extend_schema(request=None, responses={200: PseudoRuleOutputSerializer, 409: ERROR},
                   summary="Audit the rule on the blinded labels of the dev pairs it selects (reviewers not shown the "
                           "proposal), once: refused with too few; accepted only if the one-sided 95% Clopper-Pearson "
                           "upper bound of its error rate is within the declared bound")
    def post(self, request, rule_id: int):
        rule = pseudo_rule_calibrate(rule_row=selectors.pseudo_rule_get(rule_id=rule_id))
        return Response(PseudoRuleOutputSerializer(rule).data)


class PseudoRuleApplyApi(APIView):
    permission_classes = [IsManager]

    class OutputSerializer(serializers.Serializer):
        considered = serializers.IntegerField(help_text="unreviewed mined train pairs")
        labelled = serializers.IntegerField(help_text="new pseudo-negatives (training only)")
        other_encoder = serializers.IntegerField(help_text="unreviewed train pairs left alone: their similarity "
                                                           "comes from another encoder than the rule's")
        coverage = serializers.FloatField(required=False)
        calibration_coverage = serializers.FloatField(required=False)
        coverage_drift = serializers.FloatField(required=False)

    @extend_schema(request=None, responses={200: OutputSerializer, 409: ERROR},
                   summary="Label the train split's unreviewed mined pairs that an accepted rule selects as tagged "
                           "pseudo-negatives (idempotent)")
    def post(self, request, rule_id: int):
        counts = pseudo_labels_apply(rule_row=selectors.pseudo_rule_get(rule_id=rule_id))
        return Response(self.OutputSerializer(counts).data)


