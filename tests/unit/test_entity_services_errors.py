"""The web-service clients' errors without a service: an unreachable endpoint, and advice that names the
knowledge base's own settings."""

from __future__ import annotations

from pathlib import Path

import pytest

from cast.entity.link.linkers import entity_uri
from cast.entity.link.spotlight import SpotlightLinker
from cast.entity.relatedness import SparqlKnowledgeBase
from cast.errors import ServiceUnavailableError


def test_spotlight_unreachable_endpoint(tmp_path: Path):
    linker = SpotlightLinker(endpoint="http://127.0.0.1:9/annotate", retries=0, timeout=1.0)
    with pytest.raises(ServiceUnavailableError, match="127.0.0.1:9/annotate is unreachable"):
        linker.link("Berlin")


def test_sparql_failures_advise_the_knowledge_bases_own_settings(tmp_path: Path):
    kb = SparqlKnowledgeBase(endpoint="http://127.0.0.1:9/sparql", total=10, retries=0, timeout=1.0)
    with pytest.raises(ServiceUnavailableError) as error:
        kb.relatedness(entity_uri("A"), entity_uri("B"))
    assert "knowledge_base.endpoint" in str(error.value) and "on_error" not in str(error.value)
