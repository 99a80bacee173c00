"""Writes of curation: items, claims, votes and adjudication, pools; agreement statistics."""
