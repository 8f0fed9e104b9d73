"""WordNet for METEOR, read offline from the NLTK data folder that ``scripts/setup_wordnet.sh`` builds.

The set-up script arranges the WordNet 3.0 files of Debian's ``wordnet-base`` and ``wordnet-sense-index``
packages as NLTK's ``corpora/wordnet`` inside the virtual environment (``<sys.prefix>/nltk_data``), so nothing is
downloaded at run time. ``$NLTK_DATA`` and NLTK's usual folders are searched as well.
"""

from __future__ import annotations

import sys
from functools import lru_cache
from pathlib import Path
from typing import Any

from cast.errors import CastError


def nltk_data_dir() -> Path:
    """The NLTK data folder of this environment, where the set-up script puts WordNet."""
    return Path(sys.prefix) / "nltk_data"


@lru_cache(maxsize=1)
def wordnet() -> Any:
    """NLTK's WordNet reader, loaded from local files.

    Raises:
        CastError: WordNet is not installed here; the message says how to install it.
    """
    import nltk

    location = str(nltk_data_dir())
    if location not in nltk.data.path:
        nltk.data.path.insert(0, location)
    from nltk.corpus import wordnet as reader

    try:
        reader.ensure_loaded()
    except LookupError as e:
        raise CastError(
            f"METEOR needs WordNet, which is not installed in {location}: run `scripts/setup_wordnet.sh` "
            "(it uses Debian's wordnet-base package; no download from NLTK)"
        ) from e
    return reader
