"""The maths of curation, without Django: ``rules`` (the majority rule and relation/description
outcomes), ``agreement`` (inter-rater statistics), ``calibration`` (pseudo-label rules and their
bounds), ``consolidation`` (duplicate tracks into one) and ``mining``/``mining_search`` (cross-video
candidate strata)."""
