"""Chat models behind the OpenAI chat-completions protocol, as vLLM, llama.cpp's server, Ollama, TGI and SGLang
serve them: the client the LLM stages share (:class:`cast.infra.chat_stage.ChatModelStage`).

A request is ``POST {base_url}/chat/completions`` with ``model``, ``messages``, ``temperature``, ``seed`` and
``max_tokens``, streaming off. Every answer goes through the one cache (namespace ``llm``, keyed by the model, the
messages and those parameters; not by the server, so that moving a model to another host keeps its answers),
so a rerun or a resumed run asks nothing twice. Requests use the retrying, time-bounded HTTP client of the remote
entity services (:class:`cast.infra.http.JsonHttpClient`): each attempt is bounded as a whole, connection errors,
timeouts, 429 and 5xx answers are retried with back-off, and after ``give_up_after`` failed requests in a row the
server is not asked again in the run. Several turns' requests are sent side by side, at most ``concurrency`` at
once.

The API key is read from the environment variable the config names (``api_key_env``), never from the config,
and is never recorded. ``base_url: local`` asks the bundled model on an engine the client starts on its first
request (:mod:`cast.infra.engine`).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cast.errors import ConfigError, ServiceUnavailableError
from cast.infra.cache import Cache
from cast.infra.engine import LOCAL, start_bundled
from cast.infra.http import JsonHttpClient

CACHE_NAMESPACE = "llm"
ADVICE = (
    "start the model server (vLLM, llama.cpp's llama-server, Ollama...) or point base_url at a running one; "
    "answers already cached are reused without it"
)

Message = dict[str, str]


@dataclass(frozen=True)
class ChatReply:
    """One answer of a chat model.

    Attributes:
        text: the assistant message's content, stripped.
        prompt_tokens: tokens of the request as the server counted them (``None`` where it did not say).
        completion_tokens: tokens of the answer, likewise.
        finish_reason: why the model stopped (``stop``; ``length`` when ``max_tokens`` cut it).
        cached: read from the cache, not asked of the server.
    """

    text: str
    prompt_tokens: int | None
    completion_tokens: int | None
    finish_reason: str | None
    cached: bool = False

    def usage(self) -> dict[str, Any]:
        """What an answers record keeps of the call: its token counts (the same whether cached or not)."""
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "finish_reason": self.finish_reason,
        }


@dataclass(frozen=True)
class ChatServer:
    """Where and how to reach a chat server; stages with the same one share its client (one circuit breaker).

    Attributes:
        base_url: the API root, e.g. ``http://localhost:8000/v1`` (vLLM), ``http://localhost:8080/v1``
            (llama.cpp), ``http://localhost:11434/v1`` (Ollama); ``local``: the bundled model on an engine the
            client starts (:mod:`cast.infra.engine`).
        api_key_env: the environment variable holding the API key (``None``: no key is sent).
        timeout, retries, backoff, give_up_after: see :class:`cast.infra.http.JsonHttpClient`.
        concurrency: requests in flight at once.
    """

    base_url: str
    api_key_env: str | None = None
    timeout: float = 120.0
    retries: int = 2
    backoff: float = 1.0
    give_up_after: int = 2
    concurrency: int = 4

    @property
    def local(self) -> bool:
        return self.base_url == LOCAL


def completions_endpoint(base_url: str) -> str:
    return base_url.rstrip("/") + "/chat/completions"


class ChatClient:
    """Sends chat requests to one server, through the cache, at most ``concurrency`` at once.

    Counters (for ``bench/llm.py`` and end-of-run reports): ``requests`` (answers asked of the server),
    ``cache_hits``, ``prompt_tokens`` and ``completion_tokens`` (of the requests asked).

    Example:
        >>> client = ChatClient(ChatServer("http://localhost:8080/v1"), cache=None)  # doctest: +SKIP
        >>> client.complete("qwen2.5-0.5b-instruct", [{"role": "user", "content": "Hi"}], max_tokens=8)  # doctest: +SKIP
        ChatReply(text='Hello! How can I help?', prompt_tokens=9, completion_tokens=7, ...)
    """

    def __init__(
        self, server: ChatServer, cache: Cache | None, device: str = "cpu", models_dir: Path | None = None
    ):

        if not server.local and not server.base_url.startswith(("http://", "https://")):
            raise ConfigError(
                f"base_url must be an http:// or https:// URL, or {LOCAL} (the bundled model), got "
                f"{server.base_url!r}"
            )
        if server.concurrency < 1:
            raise ConfigError(f"concurrency must be at least 1, got {server.concurrency}")
        self.server = server
        self.cache = cache
        self._api_key = api_key(server.api_key_env)
        self.device = device
        self.models_dir = models_dir
        self._endpoint = None if server.local else completions_endpoint(server.base_url)
        self._engine_lock = threading.Lock()
        self.http = JsonHttpClient(
            "the bundled chat engine" if server.local else f"the chat model server at {server.base_url}",
            timeout=server.timeout,
            retries=server.retries,
            backoff=server.backoff,
            give_up_after=server.give_up_after,
            advice=ADVICE,
        )
        self._slots = threading.BoundedSemaphore(server.concurrency)
        self._count_lock = threading.Lock()
        self.requests = 0
        self.cache_hits = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0

    def complete(self, model: str, messages: Sequence[Message], **parameters: Any) -> ChatReply:
        """The model's answer to ``messages`` (see :meth:`complete_many`)."""
        return self.complete_many(model, [messages], **parameters)[0]

    def complete_many(
        self, model: str, conversations: Sequence[Sequence[Message]], **parameters: Any
    ) -> list[ChatReply]:
        """The model's answer to each of ``conversations``: cached answers first, the others asked of the server
        side by side. ``parameters`` (``temperature``, ``seed``, ``max_tokens``...) go into the request and the
        cache key as they are.

        Raises:
            ServiceUnavailableError: the server cannot be reached, refuses a request or answers something that
                is not a chat completion (one line naming the server and what to do).
        """
        keys = [
            {"model": model, "messages": [dict(m) for m in messages], "parameters": dict(parameters)}
            for messages in conversations
        ]
        stored = self.cache.get_many(CACHE_NAMESPACE, keys) if self.cache is not None else [None] * len(keys)
        replies: list[ChatReply | None] = [
            None if value is None else _reply_from_cache(value) for value in stored
        ]
        missing = [i for i, reply in enumerate(replies) if reply is None]
        with self._count_lock:
            self.cache_hits += len(keys) - len(missing)
        if missing:
            workers = min(self.server.concurrency, len(missing))
            with ThreadPoolExecutor(workers, thread_name_prefix="llm") as pool:
                # Each answer is cached as it comes: one failed request keeps the others' answers for a rerun.
                asked = list(pool.map(lambda i: self._ask(keys[i]), missing))
            for i, reply in zip(missing, asked, strict=True):
                replies[i] = reply
        return [reply for reply in replies if reply is not None]

    def _ask(self, key: dict[str, Any]) -> ChatReply:
        body = {
            "model": key["model"],
            "messages": key["messages"],
            **key["parameters"],
            "stream": False,
        }
        headers = {"Content-Type": "application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        endpoint = self.endpoint()
        with self._slots:
            answer = self.http.request("POST", endpoint, json=body, headers=headers)
        reply = parse_completion(answer, endpoint)
        if self.cache is not None:
            self.cache.put(CACHE_NAMESPACE, key, _reply_to_cache(reply))
        with self._count_lock:
            self.requests += 1
            self.prompt_tokens += reply.prompt_tokens or 0
            self.completion_tokens += reply.completion_tokens or 0
        return reply

    def endpoint(self) -> str:
        """Where requests go: the server's chat-completions URL (for ``local``, the engine's, started here once,
        with the bundled model's folder in ``models_dir``)."""
        with self._engine_lock:
            if self._endpoint is None:
                self._endpoint = completions_endpoint(start_bundled(self.models_dir, self.device).url)
        return self._endpoint

    def counters(self) -> dict[str, int]:
        """The client's counts so far: requests, cache hits and the tokens of the requests."""
        with self._count_lock:
            return {
                "requests": self.requests,
                "cache_hits": self.cache_hits,
                "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens,
            }


def api_key(variable: str | None) -> str | None:
    """The API key held by the environment variable ``variable`` (``None``: no key).

    Raises:
        ConfigError: the variable is named but not set (or empty).
    """
    if variable is None:
        return None
    value = os.environ.get(variable, "").strip()
    if not value:
        raise ConfigError(
            f"api_key_env names the environment variable {variable!r}, which is not set: export it with the "
            "server's API key, or set api_key_env: null for a server without one"
        )
    return value


def parse_completion(answer: Any, endpoint: str = "the server") -> ChatReply:
    """The reply in an OpenAI chat-completion object (``choices[0].message.content``, ``usage``).

    Raises:
        ServiceUnavailableError: ``answer`` is not a chat completion.
    """
    try:
        choice = answer["choices"][0]
        content = choice["message"].get("content")
        if content is not None and not isinstance(content, str):
            raise TypeError(f"content is {type(content).__name__}")
    except (KeyError, IndexError, TypeError, AttributeError) as e:
        raise ServiceUnavailableError(
            f"{endpoint} answered something other than a chat completion ({type(e).__name__}: {e}): "
            f"{str(answer)[:200]!r}; check that base_url is the server's OpenAI-compatible API root (.../v1)"
        ) from None
    usage = answer.get("usage") if isinstance(answer.get("usage"), dict) else {}
    return ChatReply(
        text=(content or "").strip(),
        prompt_tokens=_count(usage.get("prompt_tokens")),
        completion_tokens=_count(usage.get("completion_tokens")),
        finish_reason=choice.get("finish_reason"),
    )


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _reply_to_cache(reply: ChatReply) -> dict[str, Any]:
    return {"text": reply.text, **reply.usage()}


def _reply_from_cache(value: dict[str, Any]) -> ChatReply:
    return ChatReply(
        text=value["text"],
        prompt_tokens=value.get("prompt_tokens"),
        completion_tokens=value.get("completion_tokens"),
        finish_reason=value.get("finish_reason"),
        cached=True,
    )
