"""Curation: review items, panel seats (claims under leases), votes, adjudication and candidate
pools. ``stages/`` declares the five review stages (usability, identity, description, relation,
pair) in one registry that votes, claims, agreement, releases and the UI's stage table read."""
