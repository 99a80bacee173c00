"""Signals trajectories sends to the apps above it (the one way a lower room calls up).

``proposal_run_stored``: sent with ``run`` (the ``ProposalRun``, status succeeded) inside the
transaction that stores a run's trajectories and duplicate candidates, so a receiver's writes
commit or roll back with them; an exception in a receiver fails the store. The annotation app
connects it in its ``AppConfig.ready`` to open review of the run.
"""
from django.dispatch import Signal

proposal_run_stored = Signal()   # kwargs: run
