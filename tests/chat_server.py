"""A chat-completions server for tests and benchmarks: the subset of the OpenAI protocol the LLM stages use
(``POST /v1/chat/completions``, streaming off; ``GET /v1/models``), answering deterministically, with the
faults of real servers on demand. It runs as its own process:

    python tests/chat_server.py [--port 0] [--delay SECONDS]

and prints ``listening on http://127.0.0.1:PORT/v1`` once it accepts connections. Every request is logged and
``GET /log`` returns them (``DELETE /log`` clears it), so that a test can see what reached the server;
``GET /stats`` says how many chat requests were in flight at once at most.

What it answers depends on the requested model's name:

* ``last-line``: the last line of the last user message (a rewriter's question line).
* ``cite``: the first sentence of each of the first two numbered passages (lines ``[n] text``) of the last
  user message, each followed by its ``[n]``: an answer every sentence of which its passage supports.
* ``invent``: a sentence no passage supports, cited ``[1]``, then what ``cite`` answers.
* ``abstain``: ``I cannot answer that from these passages.``
* ``echo``: the whole last user message.
* ``error-NNN``: HTTP NNN with an OpenAI error object (400 context too long, 401, 404, 429, 500, 503).
* ``flaky``: HTTP 503 the first time a request body is seen, then what ``cite`` answers.
* ``slow``: waits 30 s before answering (longer than a test's timeout); ``--delay`` adds a wait to every answer.
* ``drop``: closes the connection without answering.
* ``trickle``: sends the headers, then one byte a second.
* ``not-json``: an HTML page with status 200.
* ``no-choices``: a JSON object without ``choices``.
* any other name: HTTP 404, "model not found", as vLLM answers.

A last user message ``please fail`` is answered with HTTP 500, whatever the model.

Token counts (``usage``) are the words of the messages and of the answer.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

MODELS = (
    "last-line",
    "cite",
    "invent",
    "abstain",
    "echo",
    "flaky",
    "slow",
    "drop",
    "trickle",
    "not-json",
    "no-choices",
    *(f"error-{status}" for status in (400, 401, 404, 429, 500, 503)),
)
_PASSAGE = re.compile(r"^\[(\d+)\]\s*(.+)$", re.MULTILINE)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s")
INVENTED = "The passages say the moon is made of green cheese."


def first_sentence(text: str) -> str:
    return _SENTENCE_END.split(text.strip(), maxsplit=1)[0]


def cited_answer(prompt: str) -> str:
    passages = _PASSAGE.findall(prompt)[:2]
    return " ".join(f"{first_sentence(text)} [{number}]" for number, text in passages)


def reply_text(model: str, prompt: str) -> str:
    if model == "last-line":
        return prompt.strip().splitlines()[-1] if prompt.strip() else ""
    if model in ("cite", "flaky"):
        return cited_answer(prompt)
    if model == "invent":
        return f"{INVENTED} [1] {cited_answer(prompt)}"
    if model == "abstain":
        return "I cannot answer that from these passages."
    return prompt  # echo


class ChatHandler(BaseHTTPRequestHandler):
    server: ChatHTTPServer
    protocol_version = "HTTP/1.1"
    # Headers and body leave in one write (flushed after each request): two small writes on a kept-alive
    # connection wait ~40 ms for the client's delayed ACK.
    wbufsize = 1 << 16

    def log_message(self, *args: Any) -> None:  # quiet: the log is served at /log
        pass

    def do_GET(self) -> None:
        if self.path.rstrip("/") == "/v1/models":
            self.send_json(200, {"object": "list", "data": [{"id": m, "object": "model"} for m in MODELS]})
        elif self.path == "/log":
            with self.server.lock:
                self.send_json(200, list(self.server.log))
        elif self.path == "/stats":
            with self.server.lock:
                self.send_json(200, {"max_in_flight": self.server.max_in_flight})
        else:
            self.send_json(404, error("not found", "invalid_request_error"))

    def do_DELETE(self) -> None:
        with self.server.lock:
            self.server.log.clear()
            self.server.seen.clear()
            self.server.max_in_flight = 0
        self.send_json(200, {})

    def do_POST(self) -> None:
        with self.server.lock:
            self.server.in_flight += 1
            self.server.max_in_flight = max(self.server.max_in_flight, self.server.in_flight)
        try:
            self.answer_chat()
        finally:
            with self.server.lock:
                self.server.in_flight -= 1

    def answer_chat(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        try:
            body = json.loads(raw)
        except ValueError:
            self.send_json(400, error("the body is not JSON", "invalid_request_error"))
            return
        with self.server.lock:
            self.server.log.append(
                {"path": self.path, "body": body, "authorization": self.headers.get("Authorization")}
            )
            first_time = raw not in self.server.seen
            self.server.seen.add(raw)
        if self.path.rstrip("/") != "/v1/chat/completions":
            self.send_json(404, error(f"no route {self.path}", "invalid_request_error"))
            return
        if body.get("stream"):
            self.send_json(400, error("streaming is not served here", "invalid_request_error"))
            return
        model = str(body.get("model", ""))
        messages = body.get("messages") or []
        if self.server.delay:
            time.sleep(self.server.delay)
        prompt = next((m.get("content", "") for m in reversed(messages) if m.get("role") == "user"), "")
        if prompt == "please fail":
            self.send_json(500, error("failing as asked", "server_error"))
            return
        if model.startswith("error-") and model[6:].isdigit():
            status = int(model[6:])
            messages_by_status = {
                400: "This model's maximum context length is 4096 tokens",
                401: "bad API key",
            }
            self.send_json(status, error(messages_by_status.get(status, f"error {status}"), "server_error"))
            return
        if model == "flaky" and first_time:
            self.send_json(503, error("overloaded, try again", "server_error"))
            return
        if model == "slow":
            time.sleep(30)
        if model == "drop":
            self.close_connection = True
            self.connection.shutdown(2)
            return
        if model == "trickle":
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", "1000")
            self.end_headers()
            self.wfile.flush()
            for _ in range(30):
                self.wfile.write(b" ")
                self.wfile.flush()
                time.sleep(1)
            return
        if model == "not-json":
            self.send_bytes(200, b"<html>Welcome to nginx</html>", "text/html")
            return
        if model == "no-choices":
            self.send_json(200, {"object": "chat.completion", "id": "x"})
            return
        if model not in MODELS:
            self.send_json(404, error(f"The model `{model}` does not exist.", "NotFoundError"))
            return
        text = reply_text(model, prompt)
        max_tokens = body.get("max_tokens")
        words = text.split()
        finish = "stop"
        if isinstance(max_tokens, int) and len(words) > max_tokens:
            text, finish = " ".join(words[:max_tokens]), "length"
        prompt_tokens = sum(len(str(m.get("content", "")).split()) for m in messages)
        self.send_json(
            200,
            {
                "id": f"chatcmpl-{len(self.server.log)}",
                "object": "chat.completion",
                "model": model,
                "choices": [
                    {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish}
                ],
                "usage": {
                    "prompt_tokens": prompt_tokens,
                    "completion_tokens": len(text.split()),
                    "total_tokens": prompt_tokens + len(text.split()),
                },
            },
        )

    def send_json(self, status: int, payload: Any) -> None:
        self.send_bytes(status, json.dumps(payload).encode("utf-8"), "application/json")

    def send_bytes(self, status: int, data: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def error(message: str, kind: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "code": None}}


class ChatHTTPServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, port: int, delay: float):
        super().__init__(("127.0.0.1", port), ChatHandler)
        self.delay = delay
        self.lock = threading.Lock()
        self.log: list[dict[str, Any]] = []
        self.seen: set[bytes] = set()
        self.in_flight = 0
        self.max_in_flight = 0


class RunningServer:
    """This server started as a process of its own (for tests and benchmarks); ``log()`` is what reached it."""

    def __init__(self, *args: str):
        self.process = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), "--port", "0", *args],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline()  # printed once it accepts connections
        assert line.startswith("listening on "), line
        self.url = line.split()[-1]
        self.root = self.url.removesuffix("/v1")

    def log(self) -> list[dict]:
        with urllib.request.urlopen(self.root + "/log") as answer:
            return json.load(answer)

    def stats(self) -> dict:
        with urllib.request.urlopen(self.root + "/stats") as answer:
            return json.load(answer)

    def clear(self) -> None:
        urllib.request.urlopen(urllib.request.Request(self.root + "/log", method="DELETE")).close()

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(10)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0, help="0: any free port")
    parser.add_argument("--delay", type=float, default=0.0, help="seconds to wait before every answer")
    args = parser.parse_args(argv)
    server = ChatHTTPServer(args.port, args.delay)
    print(f"listening on http://127.0.0.1:{server.server_port}/v1", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
        sys.stdout.flush()


if __name__ == "__main__":
    main()
