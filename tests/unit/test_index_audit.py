"""Bad inputs to `cast index build` / `cast index embed` and their readers: each is refused with one clear error,
and nothing is left behind that looks complete (regressions found by a first-day user's audit)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from cast.cli import main as cast_main
from cast.errors import CastError, DataFormatError
from cast.index.build import build_index
from cast.index.collections import read_duplicates, read_passages
from cast.index.embeddings import EmbeddingSettings, build_embeddings

SETTINGS = EmbeddingSettings("toy", 16, True)


def write_jsonl(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def passage(pid: str, text: str = "Planets orbit the Sun.") -> dict:
    return {"id": pid, "title": "Orbits", "contents": text}


def toy_embed(texts: list[str]) -> np.ndarray:
    vectors = np.ones((len(texts), 4), dtype=np.float32)
    return vectors / 2.0


def test_a_repeated_passage_id_is_a_data_format_error(tmp_path: Path) -> None:
    first = write_jsonl(tmp_path / "a.jsonl", [passage("p1"), passage("p2")])
    with pytest.raises(DataFormatError, match=r"a.jsonl: passage id 'p1' occurs a second time"):
        list(read_passages([first, first]))
    # Passages a duplicate list drops are not repeats.
    second = write_jsonl(tmp_path / "b.jsonl", [passage("p1"), passage("p3")])
    duplicates = tmp_path / "duplicates.txt"
    duplicates.write_text("p3:p1\n")
    dropped = read_duplicates(duplicates)
    assert [p.id for p in read_passages([first, second], duplicates=dropped)] == ["p2", "p3"]


def test_a_missing_duplicate_list_is_a_data_format_error(tmp_path: Path) -> None:
    with pytest.raises(DataFormatError, match=r"nowhere.txt: no such duplicate list"):
        read_duplicates(tmp_path / "nowhere.txt")


def test_threads_below_one_are_refused(tmp_path: Path) -> None:
    collection = write_jsonl(tmp_path / "c.jsonl", [passage("p1")])
    with pytest.raises(CastError, match=r"--threads must be at least 1, got 0"):
        build_index([collection], tmp_path / "index", threads=0, progress=False)


def test_embed_refuses_inputs_that_are_not_the_index_collection(tmp_path: Path) -> None:
    collection = write_jsonl(tmp_path / "c.jsonl", [passage("p1"), passage("p2"), passage("p3", "")])
    store = tmp_path / "ix.embeddings"
    summary = build_embeddings(collection, store, SETTINGS, toy_embed, 4, index_documents=2, progress=False)
    assert summary.count == 2
    with pytest.raises(
        CastError, match=r"the inputs hold 2 passages with text .*, the index 5: give --input"
    ):
        build_embeddings(
            collection, store, SETTINGS, toy_embed, 4, index_documents=5, overwrite=True, progress=False
        )
    assert (store / "embeddings.npy").is_file()  # the check comes before --overwrite discards anything


def test_embed_leaves_out_the_duplicates_the_index_left_out(tmp_path: Path) -> None:
    collection = write_jsonl(tmp_path / "c.jsonl", [passage("p1"), passage("p2"), passage("p3")])
    duplicates = tmp_path / "duplicates.txt"
    duplicates.write_text("p1:p3\n")
    summary = build_embeddings(
        collection,
        tmp_path / "ix.embeddings",
        SETTINGS,
        toy_embed,
        4,
        duplicates=duplicates,
        index_documents=2,
        progress=False,
    )
    assert summary.count == 2
    assert (tmp_path / "ix.embeddings" / "docids.txt").read_text().split() == ["p1", "p2"]


def test_resuming_with_another_chunk_size_names_the_one_to_use(tmp_path: Path) -> None:
    collection = write_jsonl(tmp_path / "c.jsonl", [passage(f"p{n}") for n in range(5)])
    store = tmp_path / "ix.embeddings"

    calls = 0

    def interrupted(texts: list[str]) -> np.ndarray:  # Ctrl-C while the second chunk is embedded
        nonlocal calls
        calls += 1
        if calls == 2:
            raise KeyboardInterrupt
        return toy_embed(texts)

    with pytest.raises(KeyboardInterrupt):
        build_embeddings(collection, store, SETTINGS, interrupted, 4, chunk_size=2, progress=False)
    with pytest.raises(CastError, match=r"started with chunk_size 2 \(now 2048\); run the same command"):
        build_embeddings(collection, store, SETTINGS, toy_embed, 4, progress=False)
    assert (
        build_embeddings(collection, store, SETTINGS, toy_embed, 4, chunk_size=2, progress=False).count == 5
    )


def test_cli_errors_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    collection = write_jsonl(tmp_path / "c.jsonl", [passage("p1")])
    base = ["index", "build", "--input", str(collection), "--index", str(tmp_path / "ix")]
    assert cast_main([*base, "--duplicates", str(tmp_path / "nowhere.txt")]) == 1
    assert capsys.readouterr().err.splitlines() == [
        f"cast index: error: {tmp_path / 'nowhere.txt'}: no such duplicate list (--duplicates)"
    ]


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("c.jsonl.gz", b"not gzip", ": not a readable gzip file"),
        ("c.jsonl", b'\xff{"id": "p1", "contents": "Latin-1"}\n', r":1: not UTF-8 text \(byte 0xff"),
        ("c.tsv", b"1\tfine\n2\tnot UTF-8 \xff\n", r":2: not UTF-8 text \(byte 0xff"),
        ("c.tsv.gz", b"not gzip", ": not a readable gzip file"),
    ],
)
def test_a_file_that_cannot_be_read_as_text_is_a_data_format_error(
    tmp_path: Path, name: str, content: bytes, message: str
) -> None:
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(DataFormatError, match=rf"{name}{message}"):
        list(read_passages(path))


class StreamingToy:
    """An encoder with a ``stream`` of its own, as ``cast index embed``'s: each text's vector from its length."""

    def __init__(self, fail_at: int | None = None):
        self.fail_at = fail_at
        self.streamed = 0

    def __call__(self, texts: list[str]) -> np.ndarray:
        return np.array([[len(t), 1.0, 0.0, 0.0] for t in texts], dtype=np.float32)

    def stream(self, chunks):
        for texts in chunks:
            self.streamed += 1
            if self.streamed == self.fail_at:
                raise KeyboardInterrupt
            yield self(list(texts))


def test_a_streaming_encoder_fills_the_store_as_chunk_by_chunk_would(tmp_path: Path) -> None:
    collection = write_jsonl(
        tmp_path / "c.jsonl", [passage(f"p{n}", "word " * (n + 1)) for n in range(7)] + [passage("p7", "")]
    )
    toy = StreamingToy()
    streamed = build_embeddings(collection, tmp_path / "a", SETTINGS, toy, 4, chunk_size=3, progress=False)
    chunked = build_embeddings(
        collection, tmp_path / "b", SETTINGS, toy.__call__, 4, chunk_size=3, progress=False
    )
    assert toy.streamed == 3 and streamed.count == chunked.count == 7
    for name in ("embeddings.npy", "docids.txt"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()


def test_an_interrupted_stream_resumes_from_its_last_written_part(tmp_path: Path) -> None:
    collection = write_jsonl(tmp_path / "c.jsonl", [passage(f"p{n}") for n in range(5)])
    store = tmp_path / "ix.embeddings"
    with pytest.raises(KeyboardInterrupt):
        build_embeddings(
            collection, store, SETTINGS, StreamingToy(fail_at=2), 4, chunk_size=2, progress=False
        )
    summary = build_embeddings(collection, store, SETTINGS, StreamingToy(), 4, chunk_size=2, progress=False)
    assert (summary.resumed, summary.embedded, summary.count) == (2, 3, 5)


def test_read_ahead_hands_on_the_readers_error() -> None:
    from cast.index.embeddings import read_ahead

    def items():
        yield 1
        raise DataFormatError("c.jsonl", "not JSON", line=2)

    read = read_ahead(items())
    assert next(read) == 1
    with pytest.raises(DataFormatError, match="c.jsonl:2: not JSON"):
        next(read)
