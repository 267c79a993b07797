"""Importers: turn other tools' output into rtlab result documents (the current schema)."""

from rtlab.ingest.cyclictest import read_cyclictest
from rtlab.ingest.rtla import read_rtla

__all__ = ["read_cyclictest", "read_rtla"]
