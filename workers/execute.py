"""Running a queued training or evaluation run, then what depends on its end.

The worker's tasks and the ``train`` / ``experiment`` commands call these. A training run that this
call trained and that succeeded gets its search index built over the evaluated snapshot
(``workers.search.search_index_build``), so the first search is fast; an ended run of an
experiment refreshes the experiment's status and table (``workers.experiments``). Neither
follow-up undoes the run when it fails: it is logged, and the index is built on the first search,
the table on the next read.
"""
from __future__ import annotations

import logging
from collections.abc import Callable

from common.models import TERMINAL
from workers.evaluation import evaluation_run_evaluate
from workers.experiments import experiment_cells_evaluated, experiment_refresh
from workers.models import EvaluationRun, RunStatus, TrainingRun
from workers.search import search_index_build
from workers.training import training_run_train

logger = logging.getLogger(__name__)


def training_run_execute(*, run: TrainingRun, echo: Callable[[float, str], None] | None = None) -> TrainingRun:
    """Train ``run`` (``workers.training.training_run_train``: idempotent, resuming), then build its
    search index when this call trained it to success, and refresh its experiment once it ended."""
    run, trained = training_run_train(run=run, echo=echo)
    if trained and run.status == RunStatus.SUCCEEDED:
        _prepare_search(run)
    if run.experiment_id is not None and run.status in TERMINAL:
        _refresh_experiment(run)
    return run


def evaluation_run_execute(*, run: EvaluationRun,
                           echo: Callable[[float, str], None] | None = None) -> EvaluationRun:
    """Evaluate ``run`` (``workers.evaluation.evaluation_run_evaluate``: idempotent), then fill the
    experiment cells it evaluates once it ended."""
    run = evaluation_run_evaluate(run=run, echo=echo)
    if run.status in TERMINAL:
        experiment_cells_evaluated(evaluation=run)
    return run


def _prepare_search(run: TrainingRun) -> None:
    try:
        search_index_build(run=run, snapshot=run.eval_snapshot if run.eval_snapshot_id else run.snapshot)
    except Exception:
        logger.exception("training run %s: the search index could not be built", run.pk)


def _refresh_experiment(run: TrainingRun) -> None:
    try:
        experiment_refresh(experiment_id=run.experiment_id)
    except Exception:
        logger.exception("training run %s: experiment %s could not be refreshed", run.pk, run.experiment_id)
