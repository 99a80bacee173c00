"""Pieces the benchmark API modules share (DESIGN 2.6-2.10).

Managers start describer, query-writer and mining runs (202 with the run and its job), revise
queries, queue completion pairs and take snapshots; every staff member reads. What each reader may
see is decided by ``annotation.benchmark.selectors``: a reader whose only role is auditor gets every
record without the fields ``HIDDEN_FROM_AUDITORS`` names (``BlindableOutputMixin``; declared
optional in the schema for that reason). What a reviewer is shown of a description, relation or
pair item, and how it is written out, is its stage's (``annotation.curation.stages``); the query
APIs take their predicates in the stages' ``PredicateSerializer`` shape.
"""
from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from rest_framework import serializers
from rest_framework.views import APIView

from annotation.benchmark import selectors
from common.roles import ManagerWritesStaffReads

ERROR = OpenApiTypes.OBJECT  # {code, message, extra}
MAX_COMPLETENESS_PAIRS = 10_000


class BlindableOutputMixin:
    """An output serializer that leaves out, when its context says the reader is blind
    (``{"blind": True}``), the fields ``relation_selectors.HIDDEN_FROM_AUDITORS[blind_record]``
    names. Nested serializers read the root's context, so one flag blinds a whole answer. Every
    such field is declared ``required=False`` so that the published schema allows its absence."""

    blind_record = ""

    def get_fields(self):
        fields = super().get_fields()
        if self.context.get("blind"):
            for name in selectors.HIDDEN_FROM_AUDITORS[self.blind_record]:
                fields.pop(name, None)
        return fields


def _reader(request) -> dict:
    """The serializer context of ``request``'s reader: whether they read blind, as an auditor."""
    return {"blind": selectors.reads_blind(request.user)}


class ManagerWritesApi(APIView):
    """Managers write (POST); every staff member reads."""

    permission_classes = [ManagerWritesStaffReads]


# -- shared pieces ---------------------------------------------------------------------------------
class FactOutputSerializer(serializers.Serializer):
    id = serializers.CharField()
    kind = serializers.CharField()
    name = serializers.CharField()
    value = serializers.CharField(allow_blank=True)
    start_frame = serializers.IntegerField()
    end_frame = serializers.IntegerField(help_text="half-open interval [start_frame, end_frame)")
    evidence_frames = serializers.ListField(child=serializers.IntegerField())
    scope = serializers.CharField()
    known = serializers.BooleanField()
