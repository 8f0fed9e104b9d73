"""Things stages share, created lazily: the index, the cache, the device, models, and stages that other stages use
(built by :func:`cast.core.registry.shared_stage`). What starts them (the JVM, models, chat clients) lives here,
above the turn core, which knows them only by the contract :class:`cast.core.stages.StageResources`."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from functools import cached_property
from pathlib import Path
from typing import Any, TypeVar

from cast.core.config_keys import ConfigKeys
from cast.errors import ConfigError
from cast.index.record import build_record
from cast.infra import jvm
from cast.infra.cache import Cache
from cast.infra.encoder import EncoderSettings, SentenceEncoder
from cast.infra.llm import ChatClient
from cast.infra.models import check_device, resolve_device

T = TypeVar("T")


class Resources:
    """Shared, lazily created resources of one pipeline.

    Args:
        config: the whole (resolved) pipeline config; stages may ask for other stages by kind
            (e.g. a selector asks for the ``knowledge_base``).
    """

    def __init__(self, config: dict[str, Any]):
        self.config = config
        self._shared: dict[Hashable, Any] = {}
        self._encoders: dict[tuple[str | None, int], Any] = {}
        self._chat_clients: dict[Any, Any] = {}

    @property
    def index_dir(self) -> Path:
        """The Lucene index of the collection (``index`` in the config)."""
        if not self.config.get("index"):
            raise ConfigError("no index configured: pass --index DIR or --set index=DIR")
        return Path(self.config["index"]).expanduser()

    @cached_property
    def stemmer(self) -> str:
        """The query analyzer's stemmer: the config's, which must be the one the index was built with (where
        ``cast-build.json`` records it), since another one silently changes every query's terms."""
        stemmer = self.config.get("stemmer", ConfigKeys.declared()["stemmer"].default)
        ConfigKeys.check("stemmer", stemmer)
        built = (build_record(self.index_dir) or {}).get("stemmer")
        if built is not None and built != stemmer:
            raise ConfigError(
                f"stemmer {stemmer!r} does not match the index {self.index_dir}, built with {built!r} (its "
                f"cast-build.json): set stemmer={built}, or rebuild the index with --stemmer {stemmer}"
            )
        return stemmer

    @cached_property
    def cache(self) -> Cache:
        cache_dir = self.config.get("cache_dir")
        return Cache(None if cache_dir is None else Path(cache_dir).expanduser() / "cache.sqlite")

    @property
    def device(self) -> str:
        """``cpu`` or ``cuda``: the config's ``device``, where ``auto`` means CUDA when available."""
        wanted = self.config.get("device", "auto")
        if wanted != "auto":
            return wanted
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"

    def searcher(self) -> Any:
        return jvm.searcher(str(self.index_dir), self.stemmer)

    def index_reader(self) -> Any:
        return jvm.index_reader(str(self.index_dir))

    def sentence_encoder(self, model: str | None, max_seq_length: int) -> Any:
        """The :class:`cast.infra.encoder.SentenceEncoder` for ``model`` (``None``: the bundled all-MiniLM-L6-v2),
        loaded once and shared by the stages that ask for the same model and length limit; it runs on the
        backend of the config's ``encoder`` section, exported into ``cache_dir/encoders``."""
        key = (model, max_seq_length)
        if key not in self._encoders:
            settings = EncoderSettings.from_config(self.config.get("encoder"))
            cache_dir = self.config.get("cache_dir")
            exports = None if cache_dir is None else Path(cache_dir).expanduser() / "encoders"
            self._encoders[key] = SentenceEncoder(
                model, resolve_device(self.device), max_seq_length, settings, exports
            )
        return self._encoders[key]

    def chat_client(self, server: Any) -> Any:
        """The :class:`cast.infra.llm.ChatClient` for a :class:`cast.infra.llm.ChatServer`, made once and shared by the stages
        that ask the same server (one circuit breaker, one bound on requests in flight), answers kept in the
        cache; the bundled model's engine runs on the config's device, its model folder in ``cache_dir/models``."""
        if server not in self._chat_clients:
            cache_dir = self.config.get("cache_dir")
            models = None if cache_dir is None else Path(cache_dir).expanduser() / "models"
            device = resolve_device(self.device) if server.local else "cpu"
            self._chat_clients[server] = ChatClient(server, self.cache, device, models)
        return self._chat_clients[server]

    def check(self) -> None:
        """A :class:`ConfigError` for resources no pipeline can start: an ``encoder`` section that does not fit
        its declaration, or (where the config names an index) a stemmer that is not the index's."""
        EncoderSettings.from_config(self.config.get("encoder"))
        if self.config.get("index"):
            self.stemmer  # noqa: B018  (checked against the index now, not at the first search)

    def check_device(self) -> None:
        """A :class:`ConfigError` for a ``device`` this machine lacks (before any model loads)."""
        check_device(self.config.get("device"))

    def shared(self, key: Hashable, build: Callable[[], T]) -> T:
        """What ``build()`` makes, made once under ``key`` and shared by everything built from these resources
        (e.g. the knowledge base every selector of a sweep reads)."""
        if key not in self._shared:
            self._shared[key] = build()
        return self._shared[key]
