"""The base of the stages that ask a chat model (the ``llm`` rewriter and summarizer): the server, the model, the
decoding parameters, and the client the pipeline's resources share (:meth:`cast.infra.resources.Resources.chat_client`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any

from pydantic import Field

from cast.core.settings import Runtime
from cast.core.stages import Stage
from cast.errors import ConfigError
from cast.infra.http import Backoff, GiveUpAfter, Retries, Timeout
from cast.infra.llm import ChatClient, ChatReply, ChatServer, Message
from cast.infra.resources import Resources


class ChatModelStage:
    """What the stages that ask a chat model share: the server, the model, the decoding parameters (a mixin put
    before the stage's kind, e.g. ``class LLMRewriter(ChatModelStage, Rewriter)``)."""

    class Settings(Stage.Settings):
        model: Annotated[
            str,
            Field(
                description=(
                    "the model's name as the server knows it (vLLM: the Hugging Face id it serves; Ollama: its "
                    "tag, e.g. ``qwen2.5:7b-instruct``; llama.cpp: any name)."
                )
            ),
        ]
        base_url: Annotated[
            str,
            Field(
                description=(
                    "the server's OpenAI-compatible API root (vLLM ``http://localhost:8000/v1``, llama.cpp "
                    "``http://localhost:8080/v1``, Ollama ``http://localhost:11434/v1``). Answers are cached by "
                    "model, messages and parameters, not by server."
                )
            ),
            Runtime(),
        ] = "http://localhost:8000/v1"
        api_key_env: Annotated[
            str | None,
            Field(
                description=(
                    "the environment variable that holds the server's API key (its name, never the key); "
                    "``null``: no key is sent."
                )
            ),
            Runtime(),
        ] = None
        temperature: Annotated[
            float,
            Field(
                ge=0,
                le=2,
                description="the sampling temperature (0: the most likely tokens, as reproducible as the server allows).",
            ),
        ] = 0.0
        seed: Annotated[
            int | None, Field(description="the sampling seed sent with every request (``null``: none).")
        ] = 0
        timeout: Timeout = 120.0
        retries: Retries = 2
        backoff: Backoff = 1.0
        give_up_after: GiveUpAfter = 2
        concurrency: Annotated[
            int,
            Field(
                ge=1,
                description="requests in flight at once (turns of different conversations are asked side by side).",
            ),
            Runtime(),
        ] = 4

    setting_values: Settings

    def __init__(self, *, resources: Resources | None = None):
        settings = self.setting_values
        if not settings.model.strip():
            raise ConfigError("model must name the model the server serves, got an empty name")
        server = ChatServer(
            base_url=settings.base_url,
            api_key_env=settings.api_key_env,
            timeout=settings.timeout,
            retries=settings.retries,
            backoff=settings.backoff,
            give_up_after=settings.give_up_after,
            concurrency=settings.concurrency,
        )
        self.client = (
            resources.chat_client(server) if resources is not None else ChatClient(server, cache=None)
        )

    def ask(self, conversations: Sequence[Sequence[Message]], max_tokens: int) -> list[ChatReply]:
        """The model's answers to ``conversations`` under this stage's decoding parameters."""
        settings = self.setting_values
        parameters: dict[str, Any] = {"temperature": settings.temperature, "max_tokens": max_tokens}
        if settings.seed is not None:
            parameters["seed"] = settings.seed
        return self.client.complete_many(settings.model, conversations, **parameters)
