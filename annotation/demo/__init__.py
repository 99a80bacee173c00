"""The demo: simulated annotators for every review stage and the builders behind
``manage.py demo`` (users, rendered videos, splits, tracker proposals)."""
