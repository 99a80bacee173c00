"""Writes of benchmark construction, one module per subdomain."""
