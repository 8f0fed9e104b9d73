"""Linker helpers shared by all linkers, and the ``none`` linker."""

from __future__ import annotations

from cast.records import EntityMention
from cast.stages import EntityLinker


class NoLinker(EntityLinker):
    """Links nothing (for pipelines whose selector needs no entities)."""

    def link(self, text: str, *, kind: str = "passage") -> list[EntityMention]:
        return []
