"""The web-service clients (Spotlight, FOX, SPARQL) against mock services on 127.0.0.1: real HTTP, real JSON."""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import numpy as np
import pytest

from cast.entity.link.fox import FoxLinker
from cast.entity.link.linkers import entity_uri
from cast.entity.link.spotlight import SpotlightLinker
from cast.entity.relatedness import LinkGraphKnowledgeBase, SparqlKnowledgeBase
from cast.errors import ConfigError, ServiceUnavailableError
from cast.infra.cache import Cache

Answer = tuple[int, object]  # (HTTP status, JSON body)


class MockService:
    """An HTTP server in a thread; ``respond(method, path, params)`` gives each answer; requests are recorded."""

    def __init__(self, respond: Callable[[str, str, dict[str, str]], Answer]):
        self.respond = respond
        self.requests: list[tuple[str, str, dict[str, str]]] = []
        self.release = threading.Event()  # holds "slow" answers until the test ends
        service = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                url = urlparse(self.path)
                params = {k: v[0] for k, v in parse_qs(url.query).items()}
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length).decode("utf-8") if length else ""
                if self.headers.get("Content-Type", "").startswith("application/json"):
                    params.update(json.loads(body))
                elif body:
                    params.update({k: v[0] for k, v in parse_qs(body).items()})
                service.requests.append((self.command, url.path, params))
                status, payload, *extra = service.respond(self.command, url.path, params)
                if status == 0:  # never answer in time
                    service.release.wait(10)
                    return
                data = (payload if isinstance(payload, str) else json.dumps(payload)).encode("utf-8")
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for name, value in (extra[0] if extra else {}).items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = _answer

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def serve() -> Iterator[Callable[..., MockService]]:
    started: list[MockService] = []

    def start(respond: Callable[[str, str, dict[str, str]], Answer]) -> MockService:
        started.append(MockService(respond))
        return started[-1]

    yield start
    for service in started:
        service.close()


class Resources:
    """The one thing remote linkers take from the pipeline's resources: the cache."""

    def __init__(self, path: Path):
        self.cache = Cache(path)


# --- DBpedia Spotlight ----------------------------------------------------------------------------------


def spotlight_answer(text: str, resources: list[tuple[str, str, int, float]]) -> dict:
    """Spotlight's JSON: every value a string; no ``Resources`` key at all when nothing was found."""
    answer = {
        "@text": text,
        "@confidence": "0.5",
        "@support": "0",
        "@types": "",
        "@sparql": "",
        "@policy": "whitelist",
    }
    if resources:
        answer["Resources"] = [
            {
                "@URI": f"http://dbpedia.org/resource/{name}",
                "@support": "1200",
                "@types": "Schema:Place,DBpedia:Place",
                "@surfaceForm": surface,
                "@offset": str(offset),
                "@similarityScore": str(score),
                "@percentageOfSecondRank": "0.01",
            }
            for name, surface, offset, score in resources
        ]
    return answer


def utf16_offset(text: str, surface: str) -> int:
    """Where Spotlight (Java) says ``surface`` starts: in UTF-16 code units."""
    return len(text[: text.find(surface)].encode("utf-16-le")) // 2


def spotlight_service(params: dict[str, str]) -> Answer:
    text = params["text"]
    found = [
        (name, surface, utf16_offset(text, surface), 0.99)
        for name, surface in [("Berlin", "Berlin"), ("Germany", "Germany"), ("Z%C3%BCrich", "Zürich")]
        if surface in text
    ]
    return 200, spotlight_answer(text, found)


def make_spotlight(service: MockService, tmp_path: Path, **settings) -> SpotlightLinker:
    settings = {"retries": 2, "backoff": 0.0, "timeout": 2.0, **settings}
    return SpotlightLinker(
        endpoint=service.url + "/rest/annotate", resources=Resources(tmp_path / "c.sqlite"), **settings
    )


def test_spotlight_links_and_sends_its_settings(serve, tmp_path: Path):
    service = serve(lambda method, path, params: spotlight_service(params))
    linker = make_spotlight(service, tmp_path, query_confidence=0.3, passage_confidence=0.6, support=20)
    text = "Berlin is the capital of Germany."
    mentions = linker.link(text, kind="query")
    assert [(m.surface, m.entity, m.linker) for m in mentions] == [
        ("Berlin", entity_uri("Berlin"), "spotlight"),
        ("Germany", entity_uri("Germany"), "spotlight"),
    ]
    assert all(text[m.start : m.end] == m.surface for m in mentions)
    assert mentions[0].confidence == pytest.approx(0.99)
    method, path, params = service.requests[0]
    assert (method, path, params["confidence"], params["support"]) == ("POST", "/rest/annotate", "0.3", "20")
    linker.link(text, kind="passage")
    assert service.requests[1][2]["confidence"] == "0.6"


def test_spotlight_no_resources_answer(serve, tmp_path: Path):
    service = serve(lambda method, path, params: spotlight_service(params))
    assert make_spotlight(service, tmp_path).link("nothing to see here") == []


def test_spotlight_rerun_is_served_from_the_cache(serve, tmp_path: Path):
    service = serve(lambda method, path, params: spotlight_service(params))
    texts = ["Berlin and Germany", "nothing here"]
    first = make_spotlight(service, tmp_path).link_batch(texts)
    assert len(service.requests) == 2
    again = make_spotlight(service, tmp_path).link_batch(texts)  # a new linker: a rerun, same cache file
    assert again == first
    assert len(service.requests) == 2
    make_spotlight(service, tmp_path, passage_confidence=0.9).link_batch(
        texts
    )  # another confidence: new calls
    assert len(service.requests) == 4


def test_spotlight_retries_5xx_with_backoff(serve, tmp_path: Path):
    failures = iter([503, 500])
    service = serve(lambda method, path, params: (next(failures, 200), spotlight_service(params)[1]))
    linker = make_spotlight(service, tmp_path, retries=2, backoff=0.5)
    waits: list[float] = []
    linker.http.sleep = waits.append
    assert [m.surface for m in linker.link("Berlin")] == ["Berlin"]
    assert len(service.requests) == 3
    assert waits == [0.5, 1.0]


def test_spotlight_timeout_fails_with_a_clear_message(serve, tmp_path: Path):
    service = serve(lambda method, path, params: (0, None))
    linker = make_spotlight(service, tmp_path, retries=1, timeout=0.2)
    with pytest.raises(
        ServiceUnavailableError,
        match=r"unreachable \(no complete answer within 0.2 s, 2 attempts\).*on_error",
    ):
        linker.link("Berlin")
    assert len(service.requests) == 2


def test_spotlight_skip_counts_unlinked_texts_and_does_not_cache_failures(serve, tmp_path: Path):
    healthy = {"on": False}
    service = serve(
        lambda method, path, params: spotlight_service(params) if healthy["on"] else (502, {"error": "down"})
    )
    linker = make_spotlight(service, tmp_path, on_error="skip", retries=0)
    assert linker.link_batch(["Berlin", "Germany", "Berlin"]) == [[], [], []]
    assert linker.unlinked_count == 3
    assert "3 of 3 texts were left without entities" in linker.report()
    healthy["on"] = True
    rerun = make_spotlight(service, tmp_path, on_error="skip", retries=0)
    assert [m.surface for m in rerun.link("Berlin")] == ["Berlin"]
    assert rerun.report() is None


def test_spotlight_4xx_is_not_retried(serve, tmp_path: Path):
    service = serve(lambda method, path, params: (400, {"error": "bad"}))
    with pytest.raises(ServiceUnavailableError, match="rejected the request with HTTP 400"):
        make_spotlight(service, tmp_path, retries=3).link("Berlin")
    assert len(service.requests) == 1


def test_spotlight_bad_input(serve, tmp_path: Path):
    service = serve(lambda method, path, params: spotlight_service(params))
    linker = make_spotlight(service, tmp_path, max_chars=100)
    assert linker.link("") == [] and linker.link("   ") == []
    assert service.requests == []  # nothing to ask about
    # Non-ASCII (and an emoji, which Java counts as two UTF-16 units) before the mention.
    text = "Grüße 🙂 aus Zürich"
    [mention] = linker.link(text)
    assert (mention.surface, text[mention.start : mention.end]) == ("Zürich", "Zürich")
    assert mention.entity == entity_uri("Zürich")  # percent-escapes decoded
    # HTML remnants: tags blanked, references decoded for the service; spans point into the original text.
    text = "<p>Trains from <b>Berlin</b> &amp; Germany&nbsp;</p>"
    mentions = linker.link(text)
    assert [text[m.start : m.end] for m in mentions] == ["Berlin", "Germany"] == [m.surface for m in mentions]
    assert "<" not in service.requests[-1][2]["text"] and "&amp;" not in service.requests[-1][2]["text"]
    # A long text is sent in chunks; spans are offsets into the whole text.
    text = ("Filler words about nothing. " * 10 + "Berlin. ") * 5
    mentions = linker.link(text)
    assert len(mentions) == 5 and all(text[m.start : m.end] == "Berlin" for m in mentions)
    assert all(len(params["text"]) <= 100 for _, _, params in service.requests[-20:])


# --- FOX ----------------------------------------------------------------------------------------------------


def fox_answer(text: str) -> dict:
    """FOX's JSON-LD (NIF): a context node, then one node per linked named entity."""
    graph = [{"@id": "http://ns.aksw.org/fox/demo#char=0,", "@type": ["nif:Context"], "isString": text}]
    for name, surface in [("Leipzig", "Leipzig"), ("Saxony", "Saxony")]:
        start = text.find(surface)
        if start >= 0:
            graph.append(
                {
                    "@id": f"http://ns.aksw.org/fox/demo#char={start},{start + len(surface)}",
                    "@type": ["nif:Phrase"],
                    "anchorOf": surface,
                    "beginIndex": {"@type": "xsd:nonNegativeInteger", "@value": str(start)},
                    "endIndex": str(start + len(surface)),
                    "taClassRef": ["dbo:Location", "schema:Place"],
                    "taIdentRef": f"dbr:{name}",
                }
            )
    return {"@graph": graph, "@context": {"dbr": "http://dbpedia.org/resource/", "nif": "http://nif#"}}


def test_fox_links_named_entities_and_caches(serve, tmp_path: Path):
    service = serve(lambda method, path, params: (200, fox_answer(params["input"])))

    def make() -> FoxLinker:
        return FoxLinker(
            endpoint=service.url + "/fox", resources=Resources(tmp_path / "c.sqlite"), backoff=0.0
        )

    text = "Leipzig is a city in Saxony."
    mentions = make().link(text, kind="query")
    assert [(m.surface, m.entity, m.confidence, m.linker) for m in mentions] == [
        ("Leipzig", entity_uri("Leipzig"), 1.0, "fox"),
        ("Saxony", entity_uri("Saxony"), 1.0, "fox"),
    ]
    assert service.requests[0][2]["task"] == "ner" and service.requests[0][2]["lang"] == "en"
    assert make().link(text) == mentions
    assert len(service.requests) == 1


def test_fox_retries_then_fails(serve, tmp_path: Path):
    service = serve(lambda method, path, params: (500, {}))
    linker = FoxLinker(endpoint=service.url + "/fox", retries=2, backoff=0.0)
    with pytest.raises(ServiceUnavailableError, match="FOX at .* is unreachable"):
        linker.link("Leipzig")
    assert len(service.requests) == 3


# --- DBpedia SPARQL -----------------------------------------------------------------------------------------


def sparql_service(inlinks: dict[str, set[str]], total: int) -> Callable[[str, str, dict[str, str]], Answer]:
    """A SPARQL endpoint over a link graph that understands the knowledge base's three queries."""
    import re

    def rows(variables: list[str], values: list[list[str]]) -> dict:
        bindings = [
            {
                v: {"type": "uri" if v != "n" else "typed-literal", "value": x}
                for v, x in zip(variables, row, strict=True)
            }
            for row in values
        ]
        return {"head": {"vars": variables}, "results": {"bindings": bindings}}

    def respond(method: str, path: str, params: dict[str, str]) -> Answer:
        query = params["query"]
        if "VALUES (?a ?b)" in query:
            pairs = re.findall(r"\(<([^>]+)> <([^>]+)>\)", query)
            found = [[a, b, str(len(inlinks.get(a, set()) & inlinks.get(b, set())))] for a, b in pairs]
            return 200, rows(["a", "b", "n"], [r for r in found if r[2] != "0"])
        if "VALUES ?e" in query:
            entities = re.findall(r"<([^>]+)>", query.split("VALUES ?e", 1)[1].split("}", 1)[0])
            found = [[e, str(len(inlinks[e]))] for e in entities if inlinks.get(e)]
            return 200, rows(["e", "n"], found)
        return 200, rows(["n"], [[str(total)]])

    return respond


def test_sparql_knowledge_base_agrees_with_the_link_graph(serve, tmp_path: Path, fixtures: Path):
    graph = LinkGraphKnowledgeBase(str(fixtures / "entity" / "links.tsv"))
    inlinks = {e: {f"src{m}" for m in graph.arrays.inlinks(e).tolist()} for e in graph.arrays.index}
    service = serve(sparql_service(inlinks, total=7))

    def make() -> SparqlKnowledgeBase:
        return SparqlKnowledgeBase(
            endpoint=service.url + "/sparql", resources=Resources(tmp_path / "c.sqlite")
        )

    entities = [entity_uri(n) for n in "ABCDEFG"] + [entity_uri("Not in the graph")]
    sparql = make().relatedness_matrix(entities, entities)
    assert np.allclose(sparql, graph.relatedness_matrix(entities, entities))
    c_d = 1 - (math.log(3) - math.log(2)) / (math.log(7) - math.log(3))
    assert sparql[2][3] == pytest.approx(c_d)
    assert len(service.requests) == 3  # total, sizes, intersections: one query each
    assert make().relatedness_matrix(entities, entities) == sparql  # a rerun: all from the cache
    assert len(service.requests) == 3


def test_sparql_escapes_iris_and_reports_bad_answers(serve, tmp_path: Path):
    service = serve(lambda method, path, params: (200, {"unexpected": True}))
    kb = SparqlKnowledgeBase(endpoint=service.url + "/sparql", total=100, backoff=0.0)
    with pytest.raises(ServiceUnavailableError, match="did not answer with SPARQL JSON results"):
        kb.relatedness(entity_uri('Quote "this"'), entity_uri("B"))
    assert "<http://dbpedia.org/resource/Quote_%22this%22>" in service.requests[0][2]["query"]


# --- bounded requests, giving up, per-turn records, partial answers ---------------------------------------------


class TricklingService:
    """Answers 200 with a body sent one byte at a time (a short server-side sleep between bytes), until the
    test ends: a server that keeps every read alive but never finishes in time."""

    def __init__(self):
        self.stop = threading.Event()
        service = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", "1000")
                self.end_headers()
                for _ in range(1000):
                    if service.stop.wait(0.05):
                        return
                    try:
                        self.wfile.write(b" ")
                        self.wfile.flush()
                    except OSError:
                        return

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.stop.set()
        self.server.shutdown()
        self.server.server_close()


def test_the_timeout_bounds_the_whole_request_against_a_trickling_server(tmp_path: Path):
    import time

    service = TricklingService()
    try:
        linker = SpotlightLinker(endpoint=service.url + "/annotate", timeout=0.5, retries=0)
        started = time.monotonic()
        with pytest.raises(ServiceUnavailableError, match=r"no complete answer within 0.5 s") as error:
            linker.link("Berlin")
        assert time.monotonic() - started < 3  # 1000 bytes at one per 0.05 s would take 50 s
        assert "cannot connect" not in str(error.value)
    finally:
        service.close()


def test_a_hanging_service_is_given_up_on_for_the_rest_of_the_run(serve, tmp_path: Path, caplog):
    service = serve(lambda method, path, params: (0, None))  # never answers
    linker = make_spotlight(service, tmp_path, on_error="skip", retries=1, timeout=0.2, give_up_after=2)
    with caplog.at_level("WARNING", logger="cast.entity.link.linkers"):
        assert linker.link_batch(["Berlin", "Germany", "Zürich", "Bonn"]) == [[], [], [], []]
        assert linker.link("Berlin again") == []
    assert len(service.requests) == 4  # two texts, two attempts each; then none
    assert linker.unlinked_count == 5 and linker.unlinked_in_last_batch == (0,)
    assert caplog.text.count("is not asked again in this run after 2 failed requests in a row") == 1
    assert "was not asked again after 2 failed requests in a row" in linker.report()
    client = make_spotlight(service, tmp_path, retries=0, timeout=0.2, give_up_after=1).http
    with pytest.raises(ServiceUnavailableError, match="unreachable"):
        client.request("POST", service.url)
    with pytest.raises(
        ServiceUnavailableError, match="not asked again in this run: 1 requests in a row failed"
    ):
        client.request("POST", service.url)
    assert len(service.requests) == 5


def test_each_turn_records_which_of_its_texts_went_unlinked(serve, tmp_path: Path):
    from types import SimpleNamespace

    from cast.core.pipeline import Pipeline
    from cast.core.records import Passage, ScoredPassage

    def respond(method, path, params):
        return (502, {}) if "Germany" in params["text"] else spotlight_service(params)

    service = serve(respond)
    linker = make_spotlight(service, tmp_path, on_error="skip", retries=0, give_up_after=0)
    assert "unlinked_texts" not in linker.describe()  # a description is taken before the run
    berlin, germany = (
        ScoredPassage(Passage(pid, text), 1.0) for pid, text in [("b", "Berlin"), ("g", "Germany")]
    )
    candidates = [(berlin, germany), (berlin,)]
    links = Pipeline.link_batch(
        SimpleNamespace(linker=linker, candidates=2), ["Germany today", "Berlin"], candidates, [(), ()]
    )
    assert [turn.unlinked_texts for turn in links] == [("query", "g"), ()]


def test_spotlights_xml_to_json_error_means_no_entities_not_a_crash(serve, tmp_path: Path):
    def respond(method, path, params):
        if "Bonn" in params["text"]:
            return 400, "Error converting XML to JSON"
        return spotlight_service(params)

    service = serve(respond)
    linker = make_spotlight(service, tmp_path, on_error="fail")
    assert [[m.surface for m in found] for found in linker.link_batch(["Bonn", "Berlin"])] == [[], ["Berlin"]]
    assert linker.unanswered_count == 1 and linker.unlinked_count == 0
    assert "1 texts were answered with an error that means no entities" in linker.report()
    with pytest.raises(ServiceUnavailableError, match="rejected the request with HTTP 400"):
        make_spotlight(serve(lambda method, path, params: (400, "Bad text")), tmp_path).link("Bonn")


def test_sparql_refuses_partial_answers_and_caches_none_of_them(serve, tmp_path: Path):
    inlinks = {entity_uri("A"): {"x", "y"}, entity_uri("B"): {"y"}}
    healthy = sparql_service(inlinks, total=10)
    cut_short = sparql_service({entity_uri("A"): {"x"}}, total=3)  # what an "anytime" answer counts
    state = {"partial": "206"}

    def respond(method, path, params):
        status, answer = (healthy if not state["partial"] else cut_short)(method, path, params)
        if state["partial"] == "206":
            return 206, answer
        if state["partial"] == "header":
            return 200, answer, {"X-SQL-State": "S1TAT"}
        return status, answer

    service = serve(respond)

    def make(**settings) -> SparqlKnowledgeBase:
        return SparqlKnowledgeBase(
            endpoint=service.url + "/sparql",
            resources=Resources(tmp_path / "c.sqlite"),
            backoff=0.0,
            **settings,
        )

    for partial in ("206", "header"):
        state["partial"] = partial
        with pytest.raises(ServiceUnavailableError, match="partial answer .*refused"):
            make().total  # noqa: B018 (asked from the endpoint)
        with pytest.raises(ServiceUnavailableError, match="partial answer"):
            make(total=10).relatedness(entity_uri("A"), entity_uri("B"))
    state["partial"] = ""
    assert make().total == 10  # nothing partial was cached
    assert make(total=10).set_sizes([entity_uri("A"), entity_uri("B")]) == [2, 1]


def test_entities_with_question_marks_and_percent_signs_keep_their_inlinks(serve, tmp_path: Path):
    # DBpedia's IRIs escape "?" and "%"; identifiers hold them decoded.
    escaped = {
        "http://dbpedia.org/resource/Who_Framed_Roger_Rabbit%3F": {"x", "y"},
        "http://dbpedia.org/resource/100%25_Love": {"y"},
    }
    service = serve(sparql_service(escaped, total=10))
    kb = SparqlKnowledgeBase(endpoint=service.url + "/sparql", total=10, backoff=0.0)
    entities = [entity_uri("Who Framed Roger Rabbit?"), entity_uri("100% Love")]
    assert entities[0].endswith("Rabbit?")
    assert kb.set_sizes(entities) == [2, 1]
    assert kb.intersection_sizes([tuple(entities)]) == [1]


def test_spotlight_filters_are_sent_and_key_the_cache(serve, tmp_path: Path):
    service = serve(lambda method, path, params: spotlight_service(params))
    make_spotlight(service, tmp_path).link("Berlin")
    assert not {"types", "sparql", "policy"} & set(service.requests[-1][2])  # unfiltered: as before
    filtered = make_spotlight(
        service, tmp_path, types="DBpedia:Place", policy="blacklist", sparql="SELECT ?x {}"
    )
    filtered.link("Berlin")
    assert len(service.requests) == 2  # another filter: not the cached unfiltered answer
    sent = service.requests[-1][2]
    assert (sent["types"], sent["policy"], sent["sparql"]) == ("DBpedia:Place", "blacklist", "SELECT ?x {}")
    with pytest.raises(ConfigError, match="policy must be one of whitelist, blacklist"):
        make_spotlight(service, tmp_path, policy="greylist")


def test_spotlight_candidates_endpoint_links_each_form_to_its_best_candidate(serve, tmp_path: Path):
    def respond(method, path, params):
        text = params["text"]
        forms = [
            {
                "@name": "Berlin",
                "@offset": str(utf16_offset(text, "Berlin")),
                "resource": [
                    {"@uri": "Berlin_(band)", "@finalScore": "0.1"},
                    {"@uri": "Berlin", "@finalScore": "0.8"},
                ],
            },
            {
                "@name": "Zürich",
                "@offset": str(utf16_offset(text, "Zürich")),
                "resource": {"@uri": "Z%C3%BCrich", "@finalScore": "0.7"},
            },
        ]
        return 200, {"annotation": {"@text": text, "surfaceForm": forms}}

    service = serve(respond)
    linker = SpotlightLinker(endpoint=service.url + "/rest/candidates", retries=0)
    text = "🙂 Berlin or Zürich"
    mentions = linker.link(text)
    assert [(m.surface, m.entity, m.confidence) for m in mentions] == [
        ("Berlin", entity_uri("Berlin"), 0.8),
        ("Zürich", entity_uri("Zürich"), 0.7),
    ]
    assert all(text[m.start : m.end] == m.surface for m in mentions)
    assert service.requests[0][1] == "/rest/candidates"
