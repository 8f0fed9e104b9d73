"""The config's top-level settings (those besides the stage sections), declared once: :class:`ConfigKeys`.

A config file's keys and the shape of their values are checked as it is read (:func:`cast.core.config.load_config`):
a misspelt key, or a number where a path is expected, fails at once, naming the file. Their values are checked
with the stages' settings when a pipeline is built from it (:func:`cast.core.pipeline.check_config`), before any
model loads.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import Field

from cast.core.settings import Settings

# The query analyzers' stemmers (:mod:`cast.infra.jvm` runs them).
Stemmer = Literal["krovetz", "porter", "none"]


class ConfigKeys(Settings):
    """A pipeline config's top-level settings."""

    section = ""

    index: Annotated[
        str | None, Field(description="the Lucene index of the collection searched (``--index``).")
    ] = None
    stemmer: Annotated[
        Stemmer,
        Field(description="the query analyzer's stemmer; it must be the one the index was built with."),
    ] = "krovetz"
    cache_dir: Annotated[
        str | None,
        Field(
            description="the folder of the one cache of expensive calls (``null``: a cache in memory only)."
        ),
    ] = None
    device: Annotated[
        str, Field(description="``auto`` (CUDA where available), ``cpu``, ``cuda``, ``cuda:1``...")
    ] = "auto"
    tag: Annotated[str | None, Field(description="the run tag (by default the config file's name).")] = None
    base: Annotated[
        str | None, Field(description="the config this one starts from: a name (``offline``) or a path.")
    ] = None
    history_responses: Annotated[
        Literal["topics", "answers"],
        Field(
            description="what later turns see as an earlier turn's response: the topics' canonical one, or the "
            "pipeline's own answer (as a live system would)."
        ),
    ] = "topics"
    encoder: Annotated[
        dict[str, Any] | None,
        Field(
            description="how the sentence encoder runs (:class:`cast.infra.encoder.EncoderSettings`, checked "
            "by the resources that run it: :meth:`cast.infra.resources.Resources.check`)."
        ),
    ] = None

    @classmethod
    def of_config(cls, config: Mapping[str, Any]) -> ConfigKeys:
        """The top-level settings of ``config`` (its stage sections aside), checked."""
        return cls.of({key: value for key, value in config.items() if key in cls.declared()})

    @classmethod
    def holds_text(cls, key: str) -> bool:
        """Whether the top-level ``key`` takes a text (a path, a name), not a section."""
        return key in cls.declared() and key != "encoder"
