"""Each review stage's labels (what the API stores, what a reviewer reads) and decisive labels.

Plain tables, read by the stage declarations (``annotation.curation.stages``) and by the work-item
model (``WorkItem.labels`` and ``WorkItem.decisive``), so the model needs no stage module.
"""
from __future__ import annotations

from dataclasses import dataclass

from models.curation.rules import MINOR


@dataclass(frozen=True)
class Label:
    value: str   # what the API stores
    text: str    # what a reviewer reads on the button


@dataclass(frozen=True)
class StageLabels:
    labels: tuple[Label, ...]
    decisive: tuple[str, ...]                # labels that decide an item

    @property
    def values(self) -> tuple[str, ...]:
        return tuple(label.value for label in self.labels)


USABILITY = StageLabels(labels=(Label("usable", "Usable"), Label("unusable", "Unusable"),
                                Label("uncertain", "Uncertain")),
                        decisive=("usable", "unusable"))
IDENTITY = StageLabels(labels=(Label("same", "Same object"), Label("different", "Different objects"),
                               Label("uncertain", "Uncertain")),
                       decisive=("same", "different"))
DESCRIPTION = StageLabels(labels=(Label("usable", "Usable as shown"), Label(MINOR, "Usable after minor correction"),
                                  Label("unusable", "Unusable"), Label("uncertain", "Uncertain")),
                          decisive=("usable", "unusable"))
RELATION = StageLabels(labels=(Label("reviewed", "Send the row's labels"),), decisive=("reviewed",))
PAIR = StageLabels(labels=(Label("match", "Match"), Label("mismatch", "Mismatch"), Label("uncertain", "Uncertain")),
                   decisive=("match", "mismatch"))

BY_STAGE: dict[str, StageLabels] = {"usability": USABILITY, "identity": IDENTITY, "description": DESCRIPTION,
                                    "relation": RELATION, "pair": PAIR}
