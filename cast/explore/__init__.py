"""The Conversation Explorer: a local web page over the pipeline (``cast explore``).

Pick a conversation (or type one turn by turn), step through its turns, and see for each turn the rewrite, the
ranked passages with their first-stage and re-ranked scores, the chosen passages, the entity graph, the answer
with each sentence linked to its passage, and evaluation figures when qrels or written responses are given.
Changing the selection method, γ, τ, the path bonus, the re-ranker, the generator or the answer length
recomputes the turn; results are cached, so flipping back is instant.

Modules:
    engine: conversations, pipelines (one per heavy-stage configuration), the result cache and the job runner.
    views: the JSON view of one answered turn (passages, entity graph, answer, evaluation).
    api: the FastAPI application (JSON API under ``/api``, OpenAPI schema at ``/openapi.json``, the page at ``/``).
    server: running the application with uvicorn on 127.0.0.1.
"""

# Seconds a request may spend answering a turn (and the turns before it) before it is stopped.
DEFAULT_TIME_LIMIT = 300.0
# Turns being answered or waiting for the one worker: more are refused (HTTP 503) rather than queued without end,
# so that a burst of requests cannot hold every server thread while health checks and cached turns wait.
DEFAULT_MAX_PENDING = 8
