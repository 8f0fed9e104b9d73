"""In-link sets of entities as one compressed-sparse-row structure (the knowledge bases' Milne-Witten inputs,
and the collection's entity postings)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


class InLinkArrays:
    """In-link sets as one CSR structure: ``members[offsets[i]:offsets[i + 1]]`` is entity ``i``'s sorted set.

    Args:
        entities: the entity identifiers, in index order.
        offsets: ``len(entities) + 1`` int64 boundaries.
        members: the concatenated sorted sets (int32 ids of in-linking entities, or of passages).
    """

    def __init__(self, entities: Sequence[str], offsets: np.ndarray, members: np.ndarray):
        self.index = {entity: i for i, entity in enumerate(entities)}
        self.offsets = offsets
        self.members = members

    def inlinks(self, entity: str) -> np.ndarray:
        i = self.index.get(entity)
        if i is None:
            return self.members[:0]
        return self.members[self.offsets[i] : self.offsets[i + 1]]

    def size(self, entity: str) -> int:
        i = self.index.get(entity)
        return 0 if i is None else int(self.offsets[i + 1] - self.offsets[i])

    @classmethod
    def from_pairs(cls, entities: Sequence[str], owners: np.ndarray, members: np.ndarray) -> InLinkArrays:
        """Build from parallel arrays: ``members[k]`` belongs to the set of entity number ``owners[k]``."""
        width = int(members.max(initial=0)) + 1
        # One int64 key per pair, sorted by owner, then member, repeats dropped; worked in place, since a
        # collection's postings hold tens of millions of pairs.
        keys = owners.astype(np.int64)
        keys *= width
        keys += members
        keys.sort()
        distinct = np.ones(len(keys), dtype=bool)
        np.not_equal(keys[1:], keys[:-1], out=distinct[1:])
        keys = keys[distinct]
        del distinct
        offsets = np.searchsorted(keys, np.arange(len(entities) + 1, dtype=np.int64) * width)
        np.remainder(keys, width, out=keys)
        return cls(entities, offsets.astype(np.int64, copy=False), keys.astype(np.int32))
