"""Importers: turn other tools' output into rtlab result documents (schema 1)."""

from rtlab.ingest.cyclictest import read_cyclictest

__all__ = ["read_cyclictest"]
