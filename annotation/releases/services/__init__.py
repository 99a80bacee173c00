"""Writes of audits and releases; ``release_io`` reads and writes release files."""
