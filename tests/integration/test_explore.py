"""The Conversation Explorer's API on the six-passage fixture index, with the baseline stages."""

from dataclasses import replace

import pytest
from fastapi.testclient import TestClient
from test_explore_without_index import answer, explorer_config

from cast.core.records import PTKBStatement
from cast.explore.api import create_app
from cast.explore.engine import Choice, Explorer, stage_sections
from cast.formats.topics import load_topics


@pytest.fixture(scope="module")
def explorer(core_index, fixtures, tmp_path_factory):
    config = explorer_config(core_index, tmp_path_factory.mktemp("explore-cache"))
    conversations = load_topics(fixtures / "core" / "conversations.json")
    qrels = {"1_3": {"p2": 3, "p1": 1}, "1_2": {"p4": 2}}
    explorer = Explorer(config, conversations, qrels=qrels, time_limit=60)
    yield explorer
    explorer.close()


@pytest.fixture(scope="module")
def client(explorer):
    with TestClient(create_app(explorer), base_url="http://127.0.0.1") as client:
        yield client


def test_options_list_stages_their_settings_and_the_config_defaults(client):
    options = client.get("/api/options").json()
    assert options["defaults"]["method"] == "o"
    assert options["defaults"]["generator"] == "topk_trim"
    assert options["defaults"]["words"] == 12
    assert options["defaults"]["reranker"] == "none"
    assert set(options["settings"]["method"]) >= {"o", "er", "eg"}
    assert set(options["settings"]["method"]["eg"]) == {"gamma", "tau", "path_bonus"}
    assert options["settings"]["generator"]["topk_trim"] == ["words"]
    assert options["judged_turns"] == 2


def test_conversations_are_listed_and_shown(client):
    listed = client.get("/api/conversations").json()["conversations"]
    assert [(c["id"], c["turns"], c["editable"]) for c in listed] == [("1", 3, False), ("2", 2, False)]
    shown = client.get("/api/conversations/1").json()
    assert shown["title"] == "Glasgow"
    assert shown["turns"][1] == {
        "number": 2,
        "qid": "1_2",
        "utterance": "Which river flows through it?",
        "manual_rewrite": "Which river flows through Glasgow?",
        "response": None,
    }


def test_a_turn_shows_rewrite_passages_choice_answer_and_evaluation(client):
    response = answer(client)
    assert response.status_code == 200, response.text
    job = response.json()
    assert job["status"] == "done" and job["params"]["method"] == "o"
    view = job["result"]
    assert view["qid"] == "1_3" and view["number"] == 3
    assert view["rewrite"] == {
        "query": "What climate conference was held in Glasgow?",
        "method": "manual",
        "inputs": {},
        "question": None,
    }
    top = view["passages"][0]
    assert top["id"] == "p2" and top["first_stage_rank"] == 1
    assert top["first_stage_score"] == pytest.approx(top["selection_score"])
    assert top["reranked_score"] is None  # no re-ranker
    assert top["chosen"] == 1 and top["relevance"] == 3
    assert [p["id"] for p in view["chosen"]] == [p["id"] for p in view["passages"][:3]]
    assert view["answer"]["text"].startswith("The COP26 climate change conference")
    assert len(view["answer"]["text"].split()) == 12
    assert {s["passage_id"] for s in view["answer"]["sentences"]} <= {p["id"] for p in view["chosen"]}
    assert view["evaluation"]["retrieval"]["nDCG@3"] > 0.9
    assert view["evaluation"]["chosen_grades"]["p2"] == 3
    assert view["graph"] == {"nodes": [], "edges": [], "ranked_by": None}
    assert set(view["timings"]) >= {"rewrite", "first_stage", "select", "summarize"}


def test_results_are_cached_per_turn_and_settings(client, explorer):
    first = answer(client, turn=2, words=5).json()
    assert not first["cached"] and len(first["result"]["answer"]["text"].split()) == 5
    calls = []
    summarizer = explorer.stage("summarizer", first_sections(explorer, words=5))
    original = summarizer.summarize_batch
    summarizer.summarize_batch = lambda items, earlier=None: calls.append(items) or original(items, earlier)
    try:
        again = client.post("/api/jobs", json={"conversation_id": "1", "turn": 2, "params": {"words": 5}})
        assert again.status_code == 200 and again.json()["cached"]
        assert again.json()["result"] == first["result"]
        other = answer(client, turn=2, words=7).json()
        assert not other["cached"] and len(other["result"]["answer"]["text"].split()) == 7
    finally:
        summarizer.summarize_batch = original
    assert calls == []  # words=7 built its own summarizer; words=5 was never recomputed


def first_sections(explorer, **params):
    return stage_sections(explorer.config, Choice(**params))[0]["summarizer"]


def test_the_earlier_turns_of_a_conversation_are_answered_once(client, explorer):
    before = len(explorer.results)
    answer(client, conversation_id="2", turn=2, words=9)
    assert len(explorer.results) == before + 2
    answer(client, conversation_id="2", turn=1, words=9)
    assert len(explorer.results) == before + 2


def test_a_job_is_polled_until_done(client, explorer):
    submitted = client.post("/api/jobs", json={"conversation_id": "2", "turn": 1, "params": {"words": 3}})
    assert submitted.status_code in (200, 202)
    job_id = submitted.json()["job_id"]
    assert explorer.job(job_id).finished.wait(30)
    polled = client.get(f"/api/jobs/{job_id}")
    assert polled.status_code == 200
    view = polled.json()["result"]
    assert view["answer"]["text"].split() == view["chosen"][0]["text"].split()[:3]


def test_typed_conversation_is_answered_turn_by_turn(client):
    created = client.post("/api/conversations", json={"title": "Mine"})
    assert created.status_code == 201
    cid = created.json()["id"]
    added = client.post(
        f"/api/conversations/{cid}/turns", json={"utterance": "Which river flows through Glasgow?"}
    )
    assert added.status_code == 201 and added.json()["turns"][0]["qid"] == f"{cid}_1"
    view = answer(client, conversation_id=cid, turn=1).json()["result"]
    assert view["rewrite"]["method"] == "raw"
    assert view["passages"][0]["id"] == "p4"
    assert view["evaluation"] is None
    blank = client.post(f"/api/conversations/{cid}/turns", json={"utterance": "   "})
    assert blank.status_code == 400 and "empty" in blank.json()["error"]
    loaded = client.post("/api/conversations/1/turns", json={"utterance": "More?"})
    assert loaded.status_code == 400 and "cannot be changed" in loaded.json()["error"]


@pytest.mark.parametrize(
    ("body", "status", "message"),
    [
        ({"conversation_id": "nope", "turn": 1}, 404, "no conversation 'nope'"),
        ({"conversation_id": "1", "turn": 4}, 404, "has 3 turn"),
        ({"conversation_id": "1", "turn": 1, "params": {"method": "zz"}}, 422, "unknown selector 'zz'"),
        ({"conversation_id": "1", "turn": 1, "params": {"gamma": 2}}, 422, "params.gamma"),
        ({"conversation_id": "1", "turn": 1, "params": {"colour": "red"}}, 422, "params.colour"),
    ],
)
def test_bad_requests_get_a_json_error(client, body, status, message):
    response = client.post("/api/jobs", json=body)
    assert response.status_code == status
    assert message in response.json()["error"]


def test_large_bodies_are_refused(client):
    response = client.post("/api/conversations", content=b"{" + b" " * 70_000 + b"}")
    assert response.status_code == 413 and "larger than the limit" in response.json()["error"]


def test_only_local_host_names_are_served(explorer):
    with TestClient(create_app(explorer), base_url="http://evil.example") as client:
        assert client.get("/api/health").status_code == 400


def test_a_failing_stage_is_reported_and_the_server_keeps_serving(client, explorer):
    sections = stage_sections(explorer.config, Choice(words=4))[0]
    summarizer = explorer.stage("summarizer", sections["summarizer"])
    original = summarizer.summarize_batch

    def broken(items, earlier=None):
        raise RuntimeError("boom")

    summarizer.summarize_batch = broken
    try:
        response = answer(client, turn=1, words=4)
    finally:
        summarizer.summarize_batch = original
    assert response.status_code == 500
    body = response.json()
    assert body["stage"] == "summarizer" and "RuntimeError: boom" in body["error"]
    assert answer(client, turn=1, words=4).status_code == 200


def test_a_turn_over_the_time_limit_is_stopped(core_index, fixtures, tmp_path):
    config = explorer_config(core_index, tmp_path)
    explorer = Explorer(config, load_topics(fixtures / "core" / "conversations.json"), time_limit=0.0)
    with TestClient(create_app(explorer), base_url="http://127.0.0.1") as client:
        response = answer(client, turn=2)
    assert response.status_code == 504
    assert "time limit of 0 s" in response.json()["error"]


def test_page_api_schema_and_security_headers(client):
    page = client.get("/")
    assert page.status_code == 200 and "Conversation Explorer" in page.text
    assert "script-src 'self'" in page.headers["content-security-policy"]
    assert client.get("/static/app.js").status_code == 200
    schema = client.get("/openapi.json").json()
    assert {"/api/jobs", "/api/jobs/{job_id}", "/api/answer", "/api/options"} <= set(schema["paths"])


def test_entity_graph_of_an_eg_turn(core_index, fixtures, tmp_path):
    collection_entities = pytest.importorskip("cast.entity.builders.collection_entities")
    entities = collection_entities.build_entity_resources(
        None, [fixtures / "core" / "corpus.jsonl"], output=tmp_path / "entities", progress=False
    )
    config = explorer_config(
        core_index,
        tmp_path,
        "linker.name=dictionary",
        "linker.mentions=all",
        f"linker.entities_dir={entities}",
        "knowledge_base.name=collection",
        f"knowledge_base.entities_dir={entities}",
    )
    explorer = Explorer(config, load_topics(fixtures / "core" / "conversations.json"))
    with TestClient(create_app(explorer), base_url="http://127.0.0.1") as client:
        response = answer(client, turn=3, method="eg", gamma=0.5)
    assert response.status_code == 200, response.text
    view = response.json()["result"]
    graph = view["graph"]
    assert graph["ranked_by"] == "PageRank"
    by_label = {n["label"]: n for n in graph["nodes"]}
    assert by_label["Glasgow"]["query"]  # linked in "What climate conference was held in Glasgow?"
    assert sum(n["rank"] for n in graph["nodes"]) == pytest.approx(1.0, abs=1e-4)
    chosen = {p["id"] for p in view["chosen"]}
    assert any(n["chosen"] for n in graph["nodes"])
    assert all(n["chosen"] == bool(set(n["passages"]) & chosen) for n in graph["nodes"])
    assert graph["edges"] and {"source", "target", "weight"} == set(graph["edges"][0])
    assert view["selection"]["method"] == "eg"


def test_an_unexpected_error_in_a_request_is_json(explorer, monkeypatch):
    def broken(cid):
        raise KeyError(cid)

    monkeypatch.setattr(explorer.conversations, "get", broken)
    with TestClient(
        create_app(explorer), base_url="http://127.0.0.1", raise_server_exceptions=False
    ) as client:
        response = client.get("/api/conversations/1")
    assert response.status_code == 500
    assert response.json()["error"].startswith("internal error: KeyError")


def test_changing_only_the_generator_reuses_retrieval(client, explorer):
    first_stage = explorer.stage("first_stage", explorer.default_sections()["first_stage"])
    assert answer(client, conversation_id="2", turn=2, words=6).status_code == 200
    calls = []
    original = first_stage.search_batch
    first_stage.search_batch = lambda *args, **kwargs: calls.append(args) or original(*args, **kwargs)
    try:
        changed = answer(client, conversation_id="2", turn=2, words=8).json()
        cid = client.post("/api/conversations", json={}).json()["id"]
        client.post(f"/api/conversations/{cid}/turns", json={"utterance": "Where is Edinburgh?"})
        new_turn = answer(client, conversation_id=cid, turn=1, words=8).json()
    finally:
        first_stage.search_batch = original
    assert not changed["cached"] and len(changed["result"]["answer"]["text"].split()) == 8
    assert new_turn["result"]["passages"][0]["id"] == "p5"
    assert calls == [(["Where is Edinburgh?"],)]  # only the query not searched before


def answered_view(config, conversations, turn):
    """The page's view of turn ``turn`` of conversation 1, answered by an explorer of ``config``."""
    explorer = Explorer(config, conversations)
    try:
        with TestClient(create_app(explorer), base_url="http://127.0.0.1") as client:
            response = answer(client, turn=turn)
    finally:
        explorer.close()
    assert response.status_code == 200, response.text
    return response.json()["result"]


def test_a_configured_verifier_shows_each_claims_support(core_index, fixtures, tmp_path):
    config = explorer_config(core_index, tmp_path, "verifier.name=claims", "verifier.unsupported=mark")
    view = answered_view(config, load_topics(fixtures / "core" / "conversations.json"), turn=3)
    verification = view["verification"]
    assert verification["verifier"] == "claims" and not verification["abstained"]
    # The top-k trim answer is the passages' own words: every claim is supported by the passage it came from.
    claims = verification["claims"]
    assert [c["text"] for c in claims] == [s["text"] for s in view["answer"]["sentences"]]
    assert all(c["supported"] and c["support"] >= 0.75 for c in claims)
    assert "verify" in view["timings"]


def test_a_configured_ptkb_selector_personalises_each_rewrite(core_index, fixtures, tmp_path):
    config = explorer_config(core_index, tmp_path, "ptkb.name=all")
    statement = PTKBStatement("1", "I am planning a trip to Scotland.")
    conversations = [
        replace(c, ptkb=(statement,)) for c in load_topics(fixtures / "core" / "conversations.json")
    ]
    view = answered_view(config, conversations, turn=1)
    # As cast run: the config's PTKB selector chose the statement, and the query carries it.
    assert view["rewrite"]["query"].endswith(statement.text) and view["rewrite"]["inputs"]["ptkb"] == ["1"]
    assert "ptkb" in view["timings"]
