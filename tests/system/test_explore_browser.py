"""End to end: the explorer served on a free port, driven in headless Chromium (Debian's ``chromium``).

Install the browser with ``scripts/setup_browser.sh`` (as root); the test is skipped where it is missing.
"""

from pathlib import Path

import pytest

from cast.core.config import load_config
from cast.explore.api import create_app
from cast.explore.engine import Explorer
from cast.explore.server import BackgroundServer
from cast.formats.topics import load_topics

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]
WAIT_MS = 60_000
HOSTILE = 'Glasgow <img src=x onerror="document.body.dataset.pwned=1"> river?'

pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists(), reason=f"no Chromium at {CHROMIUM}: run scripts/setup_browser.sh as root"
)


@pytest.fixture(scope="module")
def server(core_index, fixtures, tmp_path_factory):
    from cast.entity.builders.collection_entities import build_entity_resources

    folder = tmp_path_factory.mktemp("explore-browser")
    entities = build_entity_resources(
        None, [fixtures / "core" / "corpus.jsonl"], output=folder / "entities", progress=False
    )
    config = load_config(
        "offline",
        [
            f"index={core_index}",
            f"cache_dir={folder}",
            "rewriter.name=manual",
            "rewriter.fallback=raw",
            "reranker.name=none",
            "linker.name=dictionary",
            "linker.mentions=all",
            f"linker.entities_dir={entities}",
            f"knowledge_base.entities_dir={entities}",
            "selector.name=eg",
            "selector.gamma=0.25",
            "summarizer.name=entity_extractive",
            # 12 words: one sentence a turn, so that each turn of the six-passage fixture has one not said before.
            "summarizer.words=12",
            "verifier.name=claims",  # marks, never drops: the answers stay the generator's
            "verifier.unsupported=mark",
        ],
    )
    explorer = Explorer(config, load_topics(fixtures / "core" / "conversations.json"), time_limit=60)
    with BackgroundServer(create_app(explorer)) as running:
        yield running
    explorer.close()


@pytest.fixture(scope="module")
def page(server):
    sync_api = pytest.importorskip(
        "playwright.sync_api", reason="Playwright is not installed (pip install playwright)"
    )
    sync_api.expect.set_options(timeout=WAIT_MS)
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_FLAGS)
        page = browser.new_page(viewport={"width": 1280, "height": 1000})
        page.set_default_timeout(WAIT_MS)
        yield page
        browser.close()


def wait_until_answered(page, expect):
    expect(page.locator("#spinner")).to_be_hidden()
    expect(page.locator("#status-text")).to_contain_text("answered")
    expect(page.locator("#error")).to_be_hidden()


def test_choose_a_conversation_change_gamma_and_read_the_new_answer(server, page, tmp_path):
    from playwright.sync_api import expect

    page.goto(server.url)
    page.select_option("#conversation-select", "1")
    expect(page.locator("#turn-list button.turn")).to_have_count(3)
    page.locator("#turn-list button.turn").nth(2).click()
    expect(page.locator("#turn-title")).to_have_text("Turn 3 · 1_3")
    wait_until_answered(page, expect)
    expect(page.locator("#answer-params")).to_contain_text("γ 0.25")
    expect(page.locator("#rewrite")).to_have_text("What climate conference was held in Glasgow?")
    assert page.locator("#graph .node").count() > 0
    assert page.locator("#graph .node.query").count() > 0

    page.fill("#param-gamma", "0.9")
    page.press("#param-gamma", "Tab")
    expect(page.locator("#answer-params")).to_contain_text("γ 0.9")
    wait_until_answered(page, expect)
    answer = page.locator("#answer").inner_text()
    assert len(answer.split()) >= 5
    chosen = {item.get_attribute("data-passage") for item in page.locator("#chosen li").all()}
    linked = {s.get_attribute("data-passage") for s in page.locator("#answer .sentence.linked").all()}
    assert linked and linked <= chosen
    assert page.locator("#passages tbody tr.chosen").count() == len(chosen)
    # Each answer sentence's support, as the verifier scored it against its passage.
    expect(page.locator("#claims")).to_be_visible()
    claims = page.locator("#claims li.claim")
    assert claims.count() == page.locator("#answer .sentence").count()
    assert "support" in claims.first.inner_text()
    page.screenshot(path=str(tmp_path / "explorer.png"), full_page=True)

    page.fill("#param-gamma", "0.25")
    page.press("#param-gamma", "Tab")
    expect(page.locator("#status-text")).to_contain_text("from the cache")


def test_typed_text_is_shown_as_text_never_as_html(server, page):
    from playwright.sync_api import expect

    page.goto(server.url)
    expect(page.locator("#turn-list button.turn")).to_have_count(3)
    page.click("#new-conversation")
    expect(page.locator("#add-turn-form")).to_be_visible()
    page.fill("#new-utterance", HOSTILE)
    page.press("#new-utterance", "Enter")
    wait_until_answered(page, expect)
    expect(page.locator("#utterance")).to_have_text(HOSTILE)
    expect(page.locator("#turn-list button.turn")).to_have_text([HOSTILE])
    assert page.locator("img").count() == 0
    assert page.evaluate("document.body.dataset.pwned") is None
