"""Releases: blind audits of the verified records, versioned releases and their files (export,
import, checksums, statistics)."""
