"""Annotation records: curation (review items, votes, pools) and relations (descriptions, queries,
relations, mining, pseudo-label rules, snapshots)."""
from annotation.models.agreement import AgreementPending, AgreementRaterTally, AgreementTally  # noqa: F401
from annotation.models.curation import (  # noqa: F401
    ALL_LABELS,
    Assignment,
    CandidatePool,
    PoolMember,
    ReviewPolicy,
    Vote,
    WorkItem,
)
from annotation.models.dissent import DescriptionDissent  # noqa: F401
from annotation.models.relations import (  # noqa: F401
    CrossPair,
    Description,
    DescriptionRun,
    DescriptionVersion,
    GenerationRun,
    MiningRun,
    PseudoLabelRule,
    Query,
    Relation,
    RelationJudgment,
    RelationSnapshot,
    SnapshotRelation,
)
from annotation.models.releases import (  # noqa: F401
    Audit,
    AuditJudgment,
    AuditSample,
    Release,
    ReleaseFile,
    ReviewerPseudonym,
)
from annotation.models.seats import SeatEvent  # noqa: F401
