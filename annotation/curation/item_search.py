"""Finding review items for managers: by stage, state, video, split, annotator, decision and text.

A read only (no blinding question: managers see every item, and the list shows no one's labels,
only how many votes an item has and its decision once decided).
"""
from __future__ import annotations

from django.contrib.auth import get_user_model
from django.db.models import Count, Exists, OuterRef, Q, QuerySet

from annotation.models import Vote, WorkItem
from common.errors import ApplicationError
from common.params import ID_MAX


def work_item_search(*, stage: str | None = None, state: str | None = None, video_id: int | None = None,
                     split: str | None = None, annotator: str | None = None, label: str | None = None,
                     text: str | None = None) -> QuerySet[WorkItem]:
    """Review items, newest first, with ``n_votes``. ``annotator``: a username; items that person
    voted on (400 ``unknown_annotator`` for a name that is nobody's). ``label``: the decision.
    ``text``: an item id (ASCII digits, within the ids' range), else words in its query's text (relation and pair items) or
    its video's name."""
    qs = (WorkItem.objects.select_related("video__split_group", "query", "pair__query")
          .annotate(n_votes=Count("votes")).order_by("-id"))
    if stage:
        qs = qs.filter(stage=stage)
    if state:
        qs = qs.filter(state=state)
    if video_id is not None:
        qs = qs.filter(video_id=video_id)
    if split:
        qs = qs.filter(video__split_group__split=split)
    if annotator:
        person = get_user_model().objects.filter(username=annotator).values_list("pk", flat=True).first()
        if person is None:
            raise ApplicationError(f"no account is named {annotator!r}", code="unknown_annotator")
        qs = qs.filter(Exists(Vote.objects.filter(item=OuterRef("pk"), annotator_id=person)))
    if label:
        qs = qs.filter(decision=label)
    if text:
        words = text.strip()
        qs = qs.filter(Q(pk=int(words)) if _is_id(words) else
                       Q(query__text__icontains=words) | Q(pair__query__text__icontains=words)
                       | Q(video__name__icontains=words))
    return qs


def _is_id(words: str) -> bool:
    """Whether ``words`` is an id: ASCII digits only (``str.isdigit`` also takes ``²`` and ``①``,
    which ``int`` refuses) and within the ids' range."""
    return words.isascii() and words.isdigit() and int(words) <= ID_MAX
