"""A Lucene index of a handful of texts, for tests whose document frequencies are chosen by hand."""

from collections.abc import Sequence
from pathlib import Path


def tiny_index(folder: Path, texts: Sequence[str]) -> Path:
    """Index ``texts`` (ids ``d0``, ``d1``, ...) into ``folder`` with the Krovetz analyzer."""
    from cast.infra import jvm

    indexer = jvm.indexer(folder, stemmer="krovetz", threads=1)
    for n, text in enumerate(texts):
        indexer.add_doc_dict({"id": f"d{n}", "contents": text})
    indexer.close()
    return folder
