"""The pseudo-label gate for automatic easy negatives (DESIGN 2.9; VTrajEmbed paper, Appendix E.3.2).

Mined easy negatives are normally reviewed in stratified samples. Optionally a *rule* may label
some of them ``0`` without review, as **pseudo-labels**: tagged, training-only, never benchmark
ground truth. The protocol, in order:

1. Freeze a rule (:class:`EasyNegativeRule`); its identity is :meth:`EasyNegativeRule.rule_hash`,
   the SHA-256 of its canonical JSON.
2. Run it on development pairs (:func:`rule_select`), audit a uniform sample of the pairs it
   selects (:func:`sample_for_audit`; :func:`min_audit_size` says how many are needed), and
   record each audited pair as ``"correct"``, ``"error"`` or ``"uncertain"``. The audit is
   *blinded*: only labels given by people who were not shown the model's proposal estimate the
   rule's error (a reviewer who sees "mismatch" proposed tends to agree with it); the calibration
   records that (``blinded``) and how many selected pairs it left out for being labelled with the
   proposal in view (``n_not_blinded``) or not labelled at all (``n_unreviewed``).
3. :func:`calibrate` turns the outcomes into a :class:`Calibration`: uncertain outcomes count as
   errors, and the rule is accepted only if the one-sided Clopper–Pearson upper bound of its
   error rate (:func:`clopper_pearson_upper`, 95% by default) is at most the bound declared
   before the audit.
4. :func:`apply_rule` labels training pairs, and refuses (``ValueError``) when the rule's hash
   differs from the calibrated one ("rule changed after calibration"), when the calibration was
   not accepted or not blinded, or when the split is not ``"train"``. It reports the rule's coverage next to
   the coverage seen in calibration, as a drift check.

The rule reads the pair's mined similarity (from ``models.curation.mining``; ``encoder`` names the space)
and the query's required predicates against the trajectory's approved facts with
``models.facts.predicate_support``: a predicate is *contradicted* when it returns 0. High
similarity never confirms and a textual omission never contradicts; only known facts do.

Inputs are plain: pair columns (ids, similarity, stratum names) plus mappings
``query_id -> predicates`` and ``trajectory_id -> facts`` (``Fact`` objects or their dicts). A
query or trajectory missing from its mapping has no predicates / facts, so nothing is
contradicted and the rule does not select the pair.
"""
from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field

import numpy as np
from scipy.stats import beta

from models.config import PlainConfig
from models.curation.mining import STRATA_PRIORITY
from models.facts import Fact, Predicate, canonical_json, predicate_support

OUTCOMES = ("correct", "error", "uncertain")
PSEUDO_SPLIT = "train"                           # pseudo-labels are training signal only
CALIBRATION_SPLIT = "dev"                        # rules are calibrated on development pairs


# -- the rule ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class EasyNegativeRule(PlainConfig):
    """Label a mined pair ``0`` when its similarity is low *and* the trajectory's known facts
    contradict at least ``min_contradicted`` of the query's required predicates."""

    name: str                                    # a name people recognise, e.g. "low-sim contradiction v1"
    s_max: float                                 # the pair's similarity must be strictly below this
    encoder: str                                 # the similarity it reads (MiningConfig.encoder)
    min_contradicted: int = 1                    # contradicted required predicates needed (>= 1)
    strata: tuple[str, ...] = ("easy_negative",)  # mined strata the rule may label
    event_absence: bool = False                  # an event absent over the covered interval contradicts

    def __post_init__(self):
        object.__setattr__(self, "strata", tuple(self.strata))
        if not isinstance(self.name, str) or not self.name.strip():
            raise ValueError("a rule needs a name")
        if not isinstance(self.encoder, str) or not self.encoder:
            raise ValueError("a rule needs the encoder of the similarity it reads")
        if isinstance(self.s_max, bool) or not isinstance(self.s_max, int | float) or \
                not (math.isfinite(self.s_max) and -1.0 <= self.s_max <= 1.0):
            raise ValueError(f"s_max must be a similarity in [-1, 1], got {self.s_max!r}")
        if isinstance(self.min_contradicted, bool) or not isinstance(self.min_contradicted, int) or \
                self.min_contradicted < 1:
            raise ValueError(f"min_contradicted must be an integer >= 1 (a pseudo-negative needs a "
                             f"contradicted predicate), got {self.min_contradicted!r}")
        if not self.strata or any(s not in STRATA_PRIORITY for s in self.strata):
            raise ValueError(f"strata must be mining strata {STRATA_PRIORITY}, got {self.strata!r}")
        if not isinstance(self.event_absence, bool):
            raise ValueError("event_absence must be a bool")

    def as_dict(self) -> dict:
        return super().as_dict() | {"s_max": float(self.s_max)}

    def rule_hash(self) -> str:
        """SHA-256 of the canonical JSON of every field: any change makes a new rule."""
        return hashlib.sha256(canonical_json(self.to_dict()).encode()).hexdigest()

    def contradicted(self, predicates: Sequence[Predicate | dict], facts: Sequence[Fact | dict],
                     covered: tuple[int, int] | None = None) -> list[int]:
        """Indices of the predicates that the known ``facts`` contradict."""
        facts = [f if isinstance(f, Fact) else Fact(**f) for f in facts]
        cover = covered if self.event_absence else None
        return [i for i, p in enumerate(predicates) if predicate_support(p, facts, covered=cover) == 0]

    def selects(self, similarity: float, stratum: str, predicates, facts, covered=None) -> bool:
        return (stratum in self.strata and similarity < self.s_max
                and len(self.contradicted(predicates, facts, covered)) >= self.min_contradicted)


def _pair_columns(query_ids, trajectory_ids, similarity, strata) -> tuple[np.ndarray, ...]:
    q = np.asarray(query_ids)
    t = np.asarray(trajectory_ids)
    s = np.asarray(similarity, dtype=np.float64)
    st = np.asarray(strata)
    n = q.size
    for name, arr in (("query_ids", q), ("trajectory_ids", t), ("similarity", s), ("strata", st)):
        if arr.ndim != 1 or arr.size != n:
            raise ValueError(f"{name} must be 1-D with one entry per pair ({n}), got shape {list(arr.shape)}")
    if n and not (np.issubdtype(q.dtype, np.integer) and np.issubdtype(t.dtype, np.integer)):
        raise ValueError("query_ids and trajectory_ids must be integers")
    if not np.isfinite(s).all():
        raise ValueError("similarity holds NaN or infinite values")
    bad = [x for x in set(st.tolist()) if x not in STRATA_PRIORITY]
    if bad:
        raise ValueError(f"unknown strata {sorted(map(str, bad))}; expected {STRATA_PRIORITY}")
    return q.astype(np.int64), t.astype(np.int64), s, st.astype(str)


def rule_select(rule: EasyNegativeRule, *, query_ids, trajectory_ids, similarity, strata,
                query_predicates: Mapping[int, Sequence], trajectory_facts: Mapping[int, Sequence],
                trajectory_covered: Mapping[int, tuple[int, int]] | None = None) -> np.ndarray:
    """bool ``[N]``: the pairs the rule would label 0 (the same selection for calibration on dev
    pairs and for application on training pairs)."""
    q, t, s, st = _pair_columns(query_ids, trajectory_ids, similarity, strata)
    covered = trajectory_covered or {}
    out = np.zeros(q.size, bool)
    for i in np.flatnonzero(np.isin(st, rule.strata) & (s < rule.s_max)):
        out[i] = len(rule.contradicted(query_predicates.get(int(q[i]), ()), trajectory_facts.get(int(t[i]), ()),
                                       covered.get(int(t[i])))) >= rule.min_contradicted
    return out


# -- the bound -----------------------------------------------------------------------------------
def clopper_pearson_upper(errors: int, n: int, confidence: float = 0.95) -> float:
    """One-sided Clopper–Pearson upper bound on an error rate from ``errors`` in ``n`` trials:
    the ``confidence`` quantile of Beta(errors + 1, n - errors); ``1 - (1 - confidence)^(1/n)``
    exactly at zero errors, 1 when every trial failed or there were none."""
    for name, value in (("errors", errors), ("n", n)):
        if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 0:
            raise ValueError(f"{name} must be a non-negative integer, got {value!r}")
    if errors > n:
        raise ValueError(f"errors ({errors}) exceed trials ({n})")
    if not (isinstance(confidence, float | int) and 0.0 < confidence < 1.0):
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
    if n == 0 or errors == n:
        return 1.0
    if errors == 0:
        return float(-math.expm1(math.log1p(-confidence) / n))
    return float(beta.ppf(confidence, errors + 1, n - errors))


def clopper_pearson_interval(successes: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Two-sided exact (Clopper–Pearson) interval of a proportion from ``successes`` in ``n``
    trials (an error rate, a dispute rate, an agreement); ``(0, 1)`` without trials."""
    if n == 0:
        return 0.0, 1.0
    alpha = 1.0 - confidence
    low = 0.0 if successes == 0 else float(beta.ppf(alpha / 2, successes, n - successes + 1))
    high = 1.0 if successes == n else float(beta.ppf(1 - alpha / 2, successes + 1, n - successes))
    return low, high


def min_audit_size(declared_bound: float, confidence: float = 0.95) -> int:
    """The smallest audit that can accept: ``n`` with zero errors and an upper bound at most
    ``declared_bound`` (e.g. 59 for a 5% bound at 95%). Any error raises the need."""
    if not 0.0 < declared_bound < 1.0:
        raise ValueError(f"declared_bound must be in (0, 1), got {declared_bound!r}")
    n = max(1, math.ceil(math.log1p(-confidence) / math.log1p(-declared_bound)))
    while clopper_pearson_upper(0, n, confidence) > declared_bound:     # guard the rounding
        n += 1
    while n > 1 and clopper_pearson_upper(0, n - 1, confidence) <= declared_bound:
        n -= 1
    return n


def sample_for_audit(n_selected: int, n: int, seed: int) -> np.ndarray:
    """``min(n, n_selected)`` indices drawn uniformly without replacement from the selected
    pairs (sorted), so the audit estimates the error rate of everything the rule selects."""
    for name, value in (("n_selected", n_selected), ("n", n), ("seed", seed)):
        if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 0:
            raise ValueError(f"{name} must be a non-negative integer, got {value!r}")
    rng = np.random.default_rng(seed)
    return np.sort(rng.choice(n_selected, size=min(n, n_selected), replace=False))


# -- calibration ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Calibration(PlainConfig):
    """The audit of one frozen rule on development pairs and the decision it supports."""

    rule_hash: str                               # the rule it calibrated (EasyNegativeRule.rule_hash)
    rule_name: str
    n: int                                       # audited pairs
    n_error: int                                 # audited "error"
    n_uncertain: int                             # audited "uncertain" (counted as errors)
    errors: int                                  # n_error + n_uncertain
    upper_bound: float                           # one-sided Clopper–Pearson upper bound at `confidence`
    declared_bound: float                        # the largest acceptable error rate, declared before
    confidence: float                            # e.g. 0.95
    accepted: bool                               # upper_bound <= declared_bound
    split: str = CALIBRATION_SPLIT               # where the audited pairs came from
    n_considered: int | None = None              # dev pairs the rule was run on
    n_selected: int | None = None                # of them, selected by the rule
    blinded: bool = False                        # every audited label came from people not shown the proposal
    n_not_blinded: int | None = None             # selected pairs left out: labelled with the proposal in view
    n_unreviewed: int | None = None              # selected pairs left out: no human label yet

    @property
    def coverage(self) -> float | None:
        """The fraction of considered dev pairs the rule selected."""
        if self.n_considered is None or self.n_selected is None or self.n_considered == 0:
            return None
        return self.n_selected / self.n_considered

    @property
    def n_blinded(self) -> int:
        """The blinded pairs the error rate was estimated from (0 for an audit that was not blinded)."""
        return self.n if self.blinded else 0

    def as_dict(self) -> dict:
        return super().as_dict() | {"coverage": self.coverage, "n_blinded": self.n_blinded}

    @classmethod
    def from_dict(cls, data: dict) -> Calibration:
        """The inverse of :meth:`as_dict` (``coverage`` and ``n_blinded`` are derived, so dropped)."""
        return super().from_dict({k: v for k, v in data.items() if k not in ("coverage", "n_blinded")})


def calibrate(rule: EasyNegativeRule, audit_outcomes: Sequence[str], declared_bound: float, *,
              confidence: float = 0.95, split: str = CALIBRATION_SPLIT, n_considered: int | None = None,
              n_selected: int | None = None, blinded: bool = False, n_not_blinded: int | None = None,
              n_unreviewed: int | None = None) -> Calibration:
    """Accept or refuse ``rule`` from the audit of a uniform sample of the dev pairs it selected.

    ``audit_outcomes``: one of ``"correct"``, ``"error"``, ``"uncertain"`` per audited pair;
    uncertain counts as an error. ``declared_bound`` must have been fixed before the audit.
    ``n_considered`` / ``n_selected`` (optional) record the rule's coverage on dev pairs.
    ``blinded``: every outcome is the label of people who were not shown the model's proposal (only
    such a calibration lets :func:`apply_rule` label anything); ``n_not_blinded`` / ``n_unreviewed``
    (optional) count the selected pairs left out of the audit for want of such a label.
    """
    if not isinstance(rule, EasyNegativeRule):
        raise ValueError(f"rule must be an EasyNegativeRule, got {type(rule).__name__}")
    if isinstance(audit_outcomes, str):
        raise ValueError("audit_outcomes must be a sequence of outcomes, not one string")
    outcomes = list(audit_outcomes)
    bad = sorted({o for o in outcomes if o not in OUTCOMES}, key=str)
    if bad:
        raise ValueError(f"unknown audit outcomes {bad}; expected {OUTCOMES}")
    if isinstance(declared_bound, bool) or not isinstance(declared_bound, int | float) or \
            not 0.0 < declared_bound < 1.0:
        raise ValueError(f"declared_bound must be in (0, 1), got {declared_bound!r}")
    if split != CALIBRATION_SPLIT:
        raise ValueError(f"rules are calibrated on {CALIBRATION_SPLIT!r} pairs, not {split!r}")
    if (n_considered is None) != (n_selected is None):
        raise ValueError("give both n_considered and n_selected, or neither")
    if n_selected is not None and not (len(outcomes) <= n_selected <= n_considered):
        raise ValueError(f"need audited ({len(outcomes)}) <= selected ({n_selected}) <= considered "
                         f"({n_considered})")
    if not isinstance(blinded, bool):
        raise ValueError(f"blinded must be a bool, got {blinded!r}")
    for name, value in (("n_not_blinded", n_not_blinded), ("n_unreviewed", n_unreviewed)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
            raise ValueError(f"{name} must be a non-negative integer, got {value!r}")
    left_out = (n_not_blinded or 0) + (n_unreviewed or 0)
    if n_selected is not None and len(outcomes) + left_out > n_selected:
        raise ValueError(f"audited ({len(outcomes)}) and left out ({left_out}) exceed selected ({n_selected})")
    n_error, n_uncertain = outcomes.count("error"), outcomes.count("uncertain")
    errors = n_error + n_uncertain
    upper = clopper_pearson_upper(errors, len(outcomes), confidence)
    return Calibration(rule_hash=rule.rule_hash(), rule_name=rule.name, n=len(outcomes), n_error=n_error,
                       n_uncertain=n_uncertain, errors=errors, upper_bound=upper,
                       declared_bound=float(declared_bound), confidence=float(confidence),
                       accepted=bool(upper <= declared_bound), split=split, n_considered=n_considered,
                       n_selected=n_selected, blinded=blinded, n_not_blinded=n_not_blinded, n_unreviewed=n_unreviewed)


# -- application ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class PseudoLabel:
    """An automatic easy negative: label 0, tagged, training only."""

    query_id: int
    trajectory_id: int
    stratum: str                                 # the mined stratum it came from
    similarity: float                            # the mined similarity
    rule_hash: str                               # the accepted rule that produced it
    contradicted: tuple[dict, ...]               # the contradicted predicates {name, value}: the evidence
    label: int = 0                               # always 0: a rule never confirms a match
    pseudo: bool = True                          # never benchmark ground truth
    source: str = "pseudo"                       # models.training.snapshot.SOURCES


@dataclass
class PseudoLabelResult:
    labels: list[PseudoLabel]                    # the selected pairs, in input order
    rule_hash: str
    n_considered: int                            # pairs passed in
    coverage: float                              # len(labels) / n_considered (nan when none passed)
    calibration_coverage: float | None           # the rule's coverage on dev pairs, when recorded
    coverage_drift: float | None = field(default=None)  # coverage - calibration_coverage

    def to_dict(self) -> dict:
        return asdict(self)


def apply_rule(rule: EasyNegativeRule, calibration: Calibration, *, query_ids, trajectory_ids, similarity, strata,
               query_predicates: Mapping[int, Sequence], trajectory_facts: Mapping[int, Sequence],
               trajectory_covered: Mapping[int, tuple[int, int]] | None = None,
               split: str = PSEUDO_SPLIT) -> PseudoLabelResult:
    """Pseudo-label training pairs with an accepted, unchanged rule (refusals: module docstring)."""
    if not isinstance(rule, EasyNegativeRule) or not isinstance(calibration, Calibration):
        raise ValueError("apply_rule needs an EasyNegativeRule and its Calibration")
    if rule.rule_hash() != calibration.rule_hash:
        raise ValueError(f"rule changed after calibration: rule {rule.name!r} hashes to {rule.rule_hash()[:12]}, "
                         f"the calibration was for {calibration.rule_hash[:12]}")
    if not calibration.accepted:
        raise ValueError(f"calibration not accepted: upper bound {calibration.upper_bound:.4f} > declared bound "
                         f"{calibration.declared_bound:.4f} ({calibration.errors} errors in {calibration.n})")
    if not calibration.blinded:
        raise ValueError("calibration not blinded: its audit labels came from reviewers who may have seen the "
                         "model's proposal; calibrate on a blinded sample")
    if split != PSEUDO_SPLIT:
        raise ValueError(f"pseudo-labels are training-only: split {split!r} is not {PSEUDO_SPLIT!r}")
    q, t, s, st = _pair_columns(query_ids, trajectory_ids, similarity, strata)
    chosen = rule_select(rule, query_ids=q, trajectory_ids=t, similarity=s, strata=st,
                         query_predicates=query_predicates, trajectory_facts=trajectory_facts,
                         trajectory_covered=trajectory_covered)
    covered = trajectory_covered or {}
    labels = []
    for i in np.flatnonzero(chosen):
        predicates = list(query_predicates.get(int(q[i]), ()))
        idx = rule.contradicted(predicates, trajectory_facts.get(int(t[i]), ()), covered.get(int(t[i])))
        evidence = tuple({"name": p.name, "value": p.value} if isinstance(p, Predicate) else
                         {"name": p["name"], "value": p["value"]} for p in (predicates[j] for j in idx))
        labels.append(PseudoLabel(int(q[i]), int(t[i]), str(st[i]), float(s[i]), calibration.rule_hash, evidence))
    coverage = len(labels) / q.size if q.size else float("nan")
    drift = None if calibration.coverage is None or not q.size else coverage - calibration.coverage
    return PseudoLabelResult(labels, calibration.rule_hash, int(q.size), coverage, calibration.coverage, drift)
