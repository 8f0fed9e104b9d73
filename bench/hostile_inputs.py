"""The reliability audits in one command: hostile inputs, settings and damage, each given to ``cast`` in a process of
its own, with what it should do and whether it did.

Each case runs ``cast`` and waits for it (``os.wait4``: wall-clock time and the process's peak resident memory); a
case still running after ``--timeout`` seconds is killed and reported as a hang. A case passes when its exit status
is the one expected and the last line of its standard error (or, for a command that succeeds, anything it printed)
holds the phrase expected. The cases:

- whole inputs without end: a device (``/dev/zero``) as topics, iKAT run or config, a FIFO as topics, 1 GiB piped
  into ``cast answer`` without a line end, a sparse 1 GiB run file of one line, a topics file one byte over its
  limit, a YAML anchor bomb;
- text: a finished run whose records hold U+2028 and U+0085 (and its TREC RAG file validated), a qrels file and a run
  file with a byte-order mark (the same scores as without), grades ``1_0``, ``٣`` and one beyond any scale, a NUL
  or ``null`` as a topic id, a JSON key given twice, an utterance of punctuation only, turns that all retrieve
  nothing;
- settings: ``device=cuda`` without CUDA, ``first_stage.k`` beyond Lucene's int;
- damage: bit flips in a segment of the index, an encoder export cut short, a second sweep with another grid into a
  folder;
- ``cast eval --run`` of a device, a FIFO, a folder; a JVM under ``ulimit -v`` 1.5 GiB;
- the explorer (``cast explore`` on a free port): a POST from a page of another port or scheme, a client that goes
  away mid-upload (one log line), a request head that never ends (cut off).

The index searched is built from the test fixtures' six passages into a temporary folder; memory over many turns is
``bench/turn_memory.py``'s.

    .venv/bin/python bench/hostile_inputs.py [--timeout 300]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from cast.benchmark.scripts import (
    REPO,
    load_average,
)

CAST = [sys.executable, "-m", "cast.cli"]
FIXTURES = REPO / "tests" / "fixtures"
CHEAP_STAGES = [
    word
    for setting in ("linker.name=none", "selector.name=o", "summarizer.name=topk_trim")
    for word in ("--set", setting)
]


@dataclass
class Case:
    """A command, what its exit status should be, and a phrase its last line of stderr (where it succeeds: anything
    it printed) should hold."""

    name: str
    argv: list[str]
    exit: int
    says: str
    stdin_bytes: int = 0  # zero bytes (no line end) piped to it, 1 MiB at a time, until it stops reading
    address_limit: int | None = None  # bytes of address space (``ulimit -v``)


def measure(case: Case, timeout: float) -> tuple[str, float, float, str, bool]:
    """(exit status or "hang", seconds, peak MB, what it said, whether it did as expected) of a case: what it said is
    the line holding the phrase expected where it succeeded as expected, else its last line."""
    limit = case.address_limit

    def limited() -> None:
        if limit is not None:
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    started = time.perf_counter()
    process = subprocess.Popen(
        [*CAST, *case.argv],
        stdin=subprocess.PIPE if case.stdin_bytes else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        preexec_fn=limited if limit is not None else None,  # no thread runs yet
    )
    if case.stdin_bytes:

        def feed() -> None:
            assert process.stdin is not None
            try:
                for _ in range(case.stdin_bytes >> 20):
                    process.stdin.write(b"\0" * (1 << 20))
                process.stdin.close()
            except (BrokenPipeError, ValueError):
                pass

        threading.Thread(target=feed, daemon=True).start()
    outputs: dict[str, bytes] = {}
    readers = [
        threading.Thread(target=lambda name=name, stream=stream: outputs.__setitem__(name, stream.read()))
        for name, stream in (("out", process.stdout), ("err", process.stderr))
    ]
    for reader in readers:
        reader.start()
    timer = threading.Timer(timeout, process.kill)
    timer.start()
    _, status, usage = os.wait4(process.pid, 0)
    timer.cancel()
    seconds = time.perf_counter() - started
    for reader in readers:
        reader.join()
    code = "hang" if seconds >= timeout else str(os.waitstatus_to_exitcode(status))
    shown = (outputs["err"] if code != "0" else outputs["out"] + outputs["err"]).decode("utf-8", "replace")
    lines = [line for line in shown.replace("\r", "\n").split("\n") if line.strip()]
    said = lines[-1] if lines else ""
    if code == "0":
        said = next((line for line in lines if case.says in line), said)
    ok = code == str(case.exit) and case.says in said
    return code, seconds, usage.ru_maxrss / 1024, said, ok


def write_inputs(here: Path) -> dict[str, Path]:
    """The files the cases read, written into ``here``; the index built there."""
    from cast.formats.textfiles import TOPICS_BYTES

    index = here / "index"
    subprocess.run(
        [*CAST, "index", "build", "--input", str(FIXTURES / "core" / "corpus.jsonl"), "--index", str(index)],
        check=True,
        capture_output=True,
    )
    os.mkfifo(here / "fifo")
    with (here / "one-line.run").open("wb") as f:
        f.truncate(1 << 30)  # sparse: 1 GiB of zeros, no line end
    with (here / "big-topics.json").open("wb") as f:
        f.truncate(TOPICS_BYTES + 1)
    levels = ['a0: &a0 ["x", "x", "x", "x", "x", "x", "x", "x", "x"]']
    levels += [f"a{n}: &a{n} [{', '.join([f'*a{n - 1}'] * 9)}]" for n in range(1, 10)]
    (here / "bomb.yaml").write_text("\n".join(levels) + "\n")
    bom = "\ufeff".encode()
    files = {
        "index": index,
        "qrels": here / "qrels",
        "bom.qrels": here / "bom.qrels",
        "bom.run": here / "bom.run",
        "grade-1_0.qrels": here / "grade-1_0.qrels",
        "grade-arabic.qrels": here / "grade-arabic.qrels",
        "grade-huge.qrels": here / "grade-huge.qrels",
    }
    files["qrels"].write_bytes((FIXTURES / "eval" / "toy.qrels").read_bytes())
    files["bom.qrels"].write_bytes(bom + files["qrels"].read_bytes())
    files["bom.run"].write_bytes(bom + (FIXTURES / "eval" / "a.run").read_bytes())
    for name, grade in (("grade-1_0", "1_0"), ("grade-arabic", "\u0663"), ("grade-huge", "9" * 26)):
        files[f"{name}.qrels"].write_text(f"q1 0 d1 {grade}\n", encoding="utf-8")

    def topics(name: str, text: str) -> None:
        files[name] = here / name
        files[name].write_text(text, encoding="utf-8")

    def sample(*utterances: str, topic_id: object = "t") -> str:
        return json.dumps({"topic_id": topic_id, "turns": [{"utterance": u} for u in utterances]})

    topics("separators.json", sample("What is Glasgow\u2028on, the river\u0085Clyde?"))
    topics("nul-id.json", sample("Who?", topic_id="a\0b"))
    topics("null-id.json", sample("Who?", topic_id=None))
    topics("key-twice.json", '{"topic_id": "t", "topic_id": "u", "turns": [{"utterance": "Who?"}]}')
    topics("punctuation.json", sample("?!"))
    topics("stop-words.json", sample("the of and", "Xyzzy plugh?"))
    topics("glasgow.json", sample("Tell me about Glasgow.", "Which river flows through it?"))
    flipped = here / "flipped-index"
    shutil.copytree(index, flipped)
    for terms in flipped.glob("*.tim"):
        data = bytearray(terms.read_bytes())
        third = len(data) // 3
        data[third : 2 * third] = bytes(b ^ 0xFF for b in data[third : 2 * third])
        terms.write_bytes(bytes(data))
    files["flipped-index"] = flipped
    files["qrels-core"] = here / "qrels-core"
    files["qrels-core"].write_text("t_1 0 p1 2\nt_2 0 p1 1\n")
    return files


CUT_EXPORT = """
import sys
from pathlib import Path
from cast.infra.encoder import EncoderSettings, SentenceEncoder

root = Path(sys.argv[1])
SentenceEncoder(None, "cpu", 256, EncoderSettings("onnx"), root)
model = next(root.glob("*/model.onnx"))
model.write_bytes(model.read_bytes()[:100_000])
"""


def cut_export(cache: Path) -> None:
    """An ONNX export of the bundled encoder in ``cache/encoders``, then cut to its first 100,000 bytes (in a process
    of its own: this one stays small, and the peak memory of the processes it starts is theirs alone)."""
    subprocess.run(
        [sys.executable, "-c", CUT_EXPORT, str(cache / "encoders")], check=True, capture_output=True
    )


def cases(here: Path, files: dict[str, Path]) -> list[Case]:
    out = str(here / "out")
    topics = str(FIXTURES / "core" / "conversations.json")
    stages = ["--set", "rewriter.name=raw", *CHEAP_STAGES, "--set", f"cache_dir={here / 'cache'}"]

    def command(name: str, index: Path = files["index"], reranker: str = "none") -> list[str]:
        return [name, "--index", str(index), *stages, "--set", f"reranker.name={reranker}"]

    run = [*command("run"), "--overwrite"]
    eval_args = ["eval", "retrieval", "--qrels"]
    sweep = [*command("sweep"), "--topics", str(files["glasgow.json"]), "--qrels", str(files["qrels-core"])]
    sweep += ["--output", str(here / "sweep")]
    return [
        # whole inputs without end
        Case("cast run --topics /dev/zero", ["run", "--topics", "/dev/zero", "--output", out], 1, "is a device"),
        Case("cast run --topics FIFO", ["run", "--topics", str(files["index"].parent / "fifo"), "--output", out], 1, "is a FIFO"),
        Case("cast validate --format ikat2023 /dev/zero", ["validate", "--format", "ikat2023", "/dev/zero"], 1, "is a device"),
        Case("cast validate --format ikat2025 /dev/zero", ["validate", "--format", "ikat2025", "/dev/zero"], 1, "is a device"),
        Case("cast run --config /dev/zero", ["run", "--config", "/dev/zero", "--topics", topics, "--output", out], 1, "no config"),
        Case("cast answer, 1 GiB piped without a line end", ["answer", "--index", str(here / "none")], 1, "a line longer than", stdin_bytes=1 << 30),
        Case("cast eval retrieval --run (1 GiB, one line)", [*eval_args, str(files["qrels"]), "--run", str(here / "one-line.run")], 1, "a line longer than"),
        Case("cast run --topics (limit + 1 byte)", ["run", "--topics", str(here / "big-topics.json"), "--output", out], 1, "more than a topics file may have"),
        Case("cast run --config (YAML anchor bomb)", ["run", "--config", str(here / "bomb.yaml"), "--topics", topics, "--output", out], 1, "aliases (*a0) are not allowed"),
        # text
        Case("cast run, U+2028 and U+0085 in a record (TREC RAG file)", [*run, "--topics", str(files["separators.json"]), "--output", out, "--format", "trec-rag24"], 0, "wrote"),
        Case("cast validate --format trec-rag24 of that run", ["validate", "--format", "trec-rag24", "--any-ids", f"{out}.trec-rag24.jsonl"], 0, "valid"),
        Case("cast eval retrieval, qrels and run with a byte-order mark", [*eval_args, str(files["bom.qrels"]), "--run", str(files["bom.run"])], 0, "2 judged turns;"),
        Case("cast eval retrieval --qrels (grade 1_0)", [*eval_args, str(files["grade-1_0.qrels"]), "--run", str(FIXTURES / "eval" / "a.run")], 1, "is not a grade"),
        Case("cast eval retrieval --qrels (grade \u0663)", [*eval_args, str(files["grade-arabic.qrels"]), "--run", str(FIXTURES / "eval" / "a.run")], 1, "is not a grade"),
        Case("cast eval retrieval --qrels (grade of 26 digits)", [*eval_args, str(files["grade-huge.qrels"]), "--run", str(FIXTURES / "eval" / "a.run")], 1, "is not a grade"),
        Case("cast run --topics (a NUL in topic_id)", [*run, "--topics", str(files["nul-id.json"]), "--output", out], 1, "(a control character)"),
        Case("cast run --topics (topic_id null)", [*run, "--topics", str(files["null-id.json"]), "--output", out], 1, "found None"),
        Case("cast run --topics (a key given twice)", [*run, "--topics", str(files["key-twice.json"]), "--output", out], 1, "appears twice"),
        Case("cast run --topics (an utterance of punctuation)", [*run, "--topics", str(files["punctuation.json"]), "--output", out], 1, "has no letter or digit"),
        Case("cast run --topics (no turn retrieves anything)", [*run, "--topics", str(files["stop-words.json"]), "--output", out], 1, "no turn retrieved a passage"),
        # settings
        Case("cast run --set device=cuda (no CUDA here)", [*run, "--set", "device=cuda", "--topics", topics, "--output", out], 1, "this machine has"),
        Case("cast run --set first_stage.k=2147483648", [*run, "--set", "first_stage.k=2147483648", "--topics", topics, "--output", out], 1, "must be in [1, 2147483647]"),
        # damage
        Case("cast run, bit flips in an index segment", [*command("run", files["flipped-index"]), "--topics", topics, "--output", f"{out}-flipped"], 1, "rebuild it with `cast index build"),
        Case("cast run, an encoder export cut short (onnx)", [*command("run", reranker="biencoder"), "--set", "encoder.backend=onnx", "--topics", topics, "--output", f"{out}-onnx"], 0, "could not be loaded"),
        Case("cast sweep, a first grid", [*sweep, "--grid", "summarizer.words=20,30"], 0, "wrote"),
        Case("cast sweep, another grid into its folder", [*sweep, "--grid", "first_stage.mu=500,1000"], 1, "holds the report of another sweep"),
        # other files; the JVM
        Case("cast eval retrieval --run /dev/zero", [*eval_args, str(files["qrels"]), "--run", "/dev/zero"], 1, "is a device"),
        Case("cast eval retrieval --run FIFO", [*eval_args, str(files["qrels"]), "--run", str(here / "fifo")], 1, "is a FIFO"),
        Case("cast eval retrieval --run (a folder)", [*eval_args, str(files["qrels"]), "--run", str(here)], 1, "is a folder"),
        Case("cast run under ulimit -v 1.5 GiB", [*run, "--topics", topics, "--output", out], 1, "cannot start Java", address_limit=3 << 29),
    ]  # fmt: skip


def explorer_cases(files: dict[str, Path], here: Path) -> list[tuple[str, bool, str]]:
    """(case, as expected, what happened) of requests to ``cast explore`` served on a free port."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen(
        [*CAST, "explore", "--index", str(files["index"]), "--port", str(port), *CHEAP_STAGES, "--set", "reranker.name=none", "--set", f"cache_dir={here / 'cache'}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )  # fmt: skip
    results = []
    try:
        deadline = time.monotonic() + 300
        health = b"GET /api/health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
        while not _answers(port, health) and time.monotonic() < deadline and server.poll() is None:
            time.sleep(0.2)  # it loads its stages first
        if _answers(port, health):
            results = _hostile_requests(port)
    finally:
        server.terminate()
        _, log = server.communicate(timeout=60)
    text = log.decode("utf-8", "replace")
    if not results:
        last = text.strip().split("\n")[-1]
        return [("cast explore starts", False, f"no answer on /api/health: {last}")]
    lines = [line for line in text.split("\n") if "went away" in line or "Traceback" in line]
    said = lines[0] if lines else "nothing logged"
    results.append(("a client that goes away mid-upload", lines == [said] and "went away" in said, said))
    return results


def _hostile_requests(port: int) -> list[tuple[str, bool, str]]:
    """Requests from pages of other origins, a client that goes away mid-upload, a head that never ends."""
    results = []
    head = f"POST /api/conversations HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
    for origin in (f"http://127.0.0.1:{port + 1}", f"https://127.0.0.1:{port}"):
        request = f"{head}Origin: {origin}\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{{}}".encode()
        status = _answers(port, request)[:12].decode("latin-1")
        results.append((f"POST with Origin {origin}", status.endswith("403"), status))
    with socket.create_connection(("127.0.0.1", port)) as dropping:
        dropping.sendall(f"{head}Content-Length: 1000\r\n\r\n{{".encode())
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", port), timeout=60) as slow:
        slow.sendall(b"GET /api/health HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        closed = slow.recv(100) == b""
    waited = time.monotonic() - started
    results.append(("a request head that never ends", closed and waited < 30, f"closed after {waited:.1f} s"))
    return results


def _answers(port: int, request: bytes) -> bytes:
    """What the server answers ``request`` (b"" where it cannot be reached)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=30) as connection:
            connection.sendall(request)
            return connection.recv(65_536)
    except OSError:
        return b""


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds after which a case is a hang")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as folder:
        here = Path(folder)
        files = write_inputs(here)
        cut_export(here / "cache")
        print(
            "| case | exit | as expected | seconds | peak MB | message |\n| --- | ---: | --- | ---: | ---: | --- |"
        )
        failed = 0
        for case in cases(here, files):
            code, seconds, peak, line, ok = measure(case, args.timeout)
            failed += not ok
            shown = line.replace(folder, "TMP")[:110]
            print(
                f"| {case.name} | {code} | {'yes' if ok else 'NO'} | {seconds:.2f} | {peak:.0f} | {shown} |",
                flush=True,
            )
        for name, ok, happened in explorer_cases(files, here):
            failed += not ok
            print(
                f"| cast explore: {name} | | {'yes' if ok else 'NO'} | | | {happened.replace(folder, 'TMP')[:110]} |"
            )
        print(f"\n{failed} case(s) not as expected; {load_average()}")


if __name__ == "__main__":
    main()
