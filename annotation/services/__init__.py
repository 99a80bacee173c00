"""Writes of the annotation app, one module per subdomain."""
