"""Writes of the trajectories app, one module per subdomain."""
