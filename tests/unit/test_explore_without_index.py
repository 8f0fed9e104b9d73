"""The Conversation Explorer where no index is needed: its settings controls, a missing index, the page's
HTML, the command's defaults."""

import re

import pytest
from fast_pipeline import FAST
from fastapi.testclient import TestClient

from cast.core.config import load_config
from cast.errors import ConfigError
from cast.explore.api import STATIC_DIR, create_app
from cast.explore.engine import Choice, Explorer, stage_sections
from cast.formats.topics import load_topics

BASELINE = ["rewriter.name=manual", "rewriter.fallback=raw", *FAST, "summarizer.words=12"]


def explorer_config(index, cache_dir, *overrides):
    return load_config("offline", [f"index={index}", f"cache_dir={cache_dir}", *BASELINE, *overrides])


def answer(client, conversation_id="1", turn=3, **params):
    return client.post(
        "/api/answer", json={"conversation_id": conversation_id, "turn": turn, "params": params}
    )


def test_changing_stages_keeps_the_settings_they_take():
    config = load_config("offline", ["index=x"])  # eg selector with candidates, n, gamma; biencoder depth 100
    sections, ignored = stage_sections(config, Choice(method="o", reranker="none", gamma=0.5, tau=0.1))
    assert sections["selector"] == {
        "name": "o",
        "candidates": 10,
        "n": 3,
        "gamma": 0.5,
        "threshold": 0.1,
        "combine": "interpolate",
        "weight": 0.5,
        "definitions": True,
    }
    assert sections["reranker"] == {"name": "none"}
    assert ignored == []
    sections, ignored = stage_sections(config, Choice(generator="seq2seq", words=30))
    assert "words" not in sections["summarizer"] and ignored == ["words"]
    with pytest.raises(ConfigError, match="unknown selector 'zz'"):
        stage_sections(config, Choice(method="zz"))


def test_a_missing_index_is_a_readable_error(fixtures, tmp_path):
    config = explorer_config(tmp_path / "nowhere", tmp_path)
    explorer = Explorer(config, load_topics(fixtures / "core" / "conversations.json"))
    with TestClient(create_app(explorer), base_url="http://127.0.0.1") as client:
        response = answer(client, turn=1)
        assert response.status_code == 422
        assert re.search(r"no index at .*nowhere", response.json()["error"])
        assert response.json()["stage"] == "first_stage"
        assert client.get("/api/health").json() == {"status": "ok"}


def test_the_page_never_builds_html_from_strings():
    for path in STATIC_DIR.glob("*.js"):
        code = path.read_text()
        for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval("):
            assert sink not in code, f"{path.name} uses {sink}"
    assert "http" not in re.sub(r"http://www\.w3\.org/2000/svg", "", (STATIC_DIR / "graph.js").read_text())


def test_explore_command_defaults_to_the_sample_and_the_demo_index(tmp_path):
    from cast.cli import build_parser
    from cast.commands.explore import main, uses_demo_index

    args = build_parser().parse_args(["explore", "--index", "somewhere", "--port", "8123"])
    assert args.func is main and args.port == 8123 and args.topics is None and args.time_limit == 300.0
    offline = load_config("offline")
    assert uses_demo_index(offline)  # its index is the sample index's place in the cache
    assert uses_demo_index({**offline, "index": None})
    assert not uses_demo_index({**offline, "index": str(tmp_path)})


def test_paths_of_one_topic_are_told_apart():
    from cast.core.records import Conversation, Turn
    from cast.explore.engine import Conversations

    def path(*turn_ids):
        return Conversation("132", tuple(Turn(f"132_{t}", "132", t, f"q{t}") for t in turn_ids))

    conversations = Conversations(
        [path("1-1", "1-2"), path("1-1", "2-1"), Conversation("7", (), title="Seven")]
    )
    assert conversations.ids() == ["132", "132~2", "7"]
    assert conversations.get("132~2").title == "Topic 132 · path 2"
    assert conversations.get("132~2").turns[1].qid == "132_2-1"
    assert conversations.get("7").title == "Seven"
