"""Importers: turn other tools' output into rtlab result documents (the current schema)."""

from rtlab.ingest.cyclictest import read_cyclictest

__all__ = ["read_cyclictest"]
