"""The demo page in a real headless Chromium against a real server: what a writer types is what gets ranked.

Needs a chromium on PATH (Debian's; tests/run installs it); Playwright drives it, no browser download.
"""

from __future__ import annotations

import asyncio
import shutil
import socket
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest
import uvicorn
from fastapi import FastAPI
from playwright.async_api import Page, Request, Route, async_playwright

from quoter.languages import Language
from quoter.quote_record import QuoteRecord
from quoter.quote_set import encode_quote_set
from quoter.serving.http.app import create_app
from quoter.serving.recommender import Recommender
from tests.serving_fixtures import tiny_bundle

CHROMIUM = "chromium"
# Seed 2 gives the tiny English bundle clearly different rankings for these contexts.
SEED = 2
GAP_TEXT = "the cat sat on the [] . the dog ran home"
GAP_LEFT, GAP_RIGHT = "the cat sat on the ", " . the dog ran home"
AUTOCOMPLETE_TEXT = "a happy dog ran"
SHOWN_RESULTS = """() => Array.from(document.querySelectorAll('[data-testid="result"]'), (item) => ({
    id: Number(item.dataset.quoteId),
    quote: item.querySelector('[data-testid="result-quote"]').textContent,
    source: item.querySelector('[data-testid="result-source"]').textContent,
    score: Number(item.dataset.score),
    probability: Number(item.dataset.probability),
}))"""
# The language and the bank tag of each result shown.
SHOWN_BANKS = """() => Array.from(document.querySelectorAll('[data-testid="result"]'), (item) => [
    item.dataset.lang, item.querySelector('[data-testid="result-bank"]').textContent,
])"""
LANGUAGES_LOADED = "() => document.querySelectorAll('#lang option').length > 1"
# Chinese text without a gap: without a language chosen, both Chinese banks rank it.
CHINESE_TEXT = "我们喜欢学习"
SETTLED = """() => ['ready', 'error'].includes(document.querySelector('[data-testid="results"]').dataset.state)"""
# Lists in window.answersRead the left context of each /recommend answer once the page's script has read it: the
# entry is made by a task queued when the body is parsed, so it runs after the page's own code that awaited it.
ANSWERS_READ = """(() => {
    window.answersRead = [];
    const fetchOfPage = window.fetch;
    window.fetch = async (resource, options) => {
        const response = await fetchOfPage(resource, options);
        if (options && options.body) {
            const left = JSON.parse(options.body).left;
            const json = response.json.bind(response);
            response.json = async () => {
                try {
                    return await json();
                } finally {
                    const channel = new MessageChannel();
                    channel.port1.onmessage = () => window.answersRead.push(left);
                    channel.port2.postMessage(null);
                }
            };
        }
        return response;
    };
})()"""
# Longer than the page's debounce pause, for a page whose clock the test moves on.
PAUSE_MS = 1000
# Quotes that end in punctuation, which Insert fits to the text around the gap.
BRIDGE = "Don't cross the bridge until you come to it."
RAVEN = 'Quoth the Raven, "Nevermore."'
PERSEVERANCE = "只要功夫深，铁杵磨成针。"
# (text with a gap, quote inserted, the text after Insert)
INSERTIONS = [
    # The sentence goes on after the gap: the quote's full stop goes.
    (
        "When the new bridge opened a year late, the mayor only said that [] and cut the ribbon.",
        BRIDGE,
        "When the new bridge opened a year late, the mayor only said that "
        "Don't cross the bridge until you come to it and cut the ribbon.",
    ),
    ("The poem ends with [] and silence.", RAVEN, 'The poem ends with Quoth the Raven, "Nevermore" and silence.'),
    # It goes on past the writer's closing marks, after which no space is added.
    ("The mayor said “[]” and left.", BRIDGE, "The mayor said “Don't cross the bridge until you come to it” and left."),
    ("The mayor said ([]) and left.", BRIDGE, "The mayor said (Don't cross the bridge until you come to it) and left."),
    # The writer's own mark follows: it replaces the quote's.
    ("The mayor said [], and left.", BRIDGE, "The mayor said Don't cross the bridge until you come to it, and left."),
    ("The mayor said [].", BRIDGE, "The mayor said Don't cross the bridge until you come to it."),
    # The text ends, or a new sentence or line begins: the quote keeps its full stop.
    ("The mayor said: []", BRIDGE, "The mayor said: Don't cross the bridge until you come to it."),
    (
        "He shrugged. [] Then he left.",
        BRIDGE,
        "He shrugged. Don't cross the bridge until you come to it. Then he left.",
    ),
    ("The mayor said []\nand left.", BRIDGE, "The mayor said Don't cross the bridge until you come to it.\nand left."),
    # Chinese: full-width marks, and no spaces.
    (
        "学外语没有捷径，每天坚持背几个单词，[]，时间久了自然就记住了。",
        PERSEVERANCE,
        "学外语没有捷径，每天坚持背几个单词，只要功夫深，铁杵磨成针，时间久了自然就记住了。",
    ),
    ("老师常说“[]”，我们都记住了。", PERSEVERANCE, "老师常说“只要功夫深，铁杵磨成针”，我们都记住了。"),
    ("“[]”这句话老师常说。", PERSEVERANCE, "“只要功夫深，铁杵磨成针”这句话老师常说。"),
    ("老师常说[]", PERSEVERANCE, "老师常说只要功夫深，铁杵磨成针。"),
]

Scenario = Callable[[Page, str], Awaitable[None]]


@contextmanager
def running_server(app: FastAPI) -> Iterator[str]:
    """Serve the app with uvicorn in a background thread on a free loopback port; yield its base URL."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the test server did not start")
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


@pytest.fixture(scope="module")
def base_url(tmp_path_factory) -> Iterator[str]:
    folder = tmp_path_factory.mktemp("demo")
    english = Recommender(tiny_bundle(folder / "en", Language.EN, seed=SEED))
    chinese = Recommender(tiny_bundle(folder / "zh", Language.ZH))
    with running_server(create_app([english, chinese])) as url:
        yield url


@pytest.fixture(scope="module")
def punctuation_url(tmp_path_factory) -> Iterator[str]:
    """A server of English and Chinese quotes that end in punctuation."""
    folder = tmp_path_factory.mktemp("punctuation")
    recommenders = []
    for language, quotes in ((Language.EN, [BRIDGE, RAVEN]), (Language.ZH, [PERSEVERANCE])):
        bundle = tiny_bundle(folder / language.value, language)
        records = [QuoteRecord(quote) for quote in quotes]
        recommenders.append(Recommender(bundle, quotes=encode_quote_set(bundle.quote_encoder, records)))
    with running_server(create_app(recommenders)) as url:
        yield url


@pytest.fixture(scope="module")
def chinese_url(tmp_path_factory) -> Iterator[str]:
    """A server of English and both Chinese banks."""
    folder = tmp_path_factory.mktemp("chinese")
    recommenders = [Recommender(tiny_bundle(folder / language.value, language)) for language in Language]
    with running_server(create_app(recommenders)) as url:
        yield url


def in_browser(base_url: str, scenario: Scenario) -> None:
    """Open the demo page in headless Chromium and run the scenario on it."""
    executable = shutil.which(CHROMIUM)
    if executable is None:
        pytest.fail(f"no {CHROMIUM} on PATH: install Debian's chromium (apt-get install chromium) to test the page")

    async def run() -> None:
        async with async_playwright() as playwright:
            browser = await playwright.chromium.launch(executable_path=executable)
            try:
                page = await browser.new_page()
                await page.add_init_script(ANSWERS_READ)
                await page.goto(base_url + "/")
                await scenario(page, base_url)
            finally:
                await browser.close()

    asyncio.run(run())


async def api_results(base_url: str, left: str, right: str, k: int, lang: str | None = None) -> dict[str, Any]:
    """What the API itself answers for a context."""
    body: dict[str, Any] = {"left": left, "right": right, "k": k}
    if lang is not None:
        body["lang"] = lang
    async with httpx.AsyncClient(base_url=base_url) as client:
        response = await client.post("/recommend", json=body)
    response.raise_for_status()
    return response.json()


async def settled_results(page: Page) -> list[dict[str, Any]]:
    """The results the page shows once its latest request is answered."""
    await page.wait_for_function(SETTLED)
    return await page.evaluate(SHOWN_RESULTS)


async def answer_read(page: Page, left: str) -> None:
    """Wait until the page's script has read the answer to its request with this left context."""
    await page.wait_for_function("(left) => window.answersRead.includes(left)", arg=left)


async def hold_answers(page: Page, left: str) -> tuple[asyncio.Event, asyncio.Event]:
    """Hold the server's answers to requests with this left context until released: (held, release)."""
    held = asyncio.Event()
    release = asyncio.Event()

    async def hold(route: Route) -> None:
        response = await route.fetch()
        if route.request.post_data_json["left"] == left:
            held.set()
            await release.wait()
        await route.fulfill(response=response)

    await page.route("**/recommend", hold)
    return held, release


def shown_form(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """API results in the form SHOWN_RESULTS reads them from the page."""
    keys = ("id", "quote", "source", "score", "probability")
    return [{key: result[key] for key in keys} for result in results]


def test_the_page_shows_the_top_quotes_of_the_api_and_follows_the_text(base_url):
    async def scenario(page: Page, base_url: str) -> None:
        requests: list[Request] = []

        def count(request: Request) -> None:
            if request.url.endswith("/recommend"):
                requests.append(request)

        page.on("request", count)
        languages = page.get_by_test_id("lang").locator("option")
        # A function, not an expression: the page's CSP forbids eval, which polling an expression needs.
        await page.wait_for_function(LANGUAGES_LOADED)
        assert await languages.evaluate_all("options => options.map(o => o.value)") == ["", "en", "zh"]
        await page.get_by_test_id("k").fill("4")

        await page.get_by_test_id("context").press_sequentially(GAP_TEXT, delay=20)
        expected = await api_results(base_url, GAP_LEFT, GAP_RIGHT, 4)
        assert len(expected["results"]) == 4
        assert await settled_results(page) == shown_form(expected["results"])
        # Debounced: typing letter by letter does not send a request per letter.
        assert len(requests) < len(GAP_TEXT) / 2
        assert "for the gap" in await page.get_by_test_id("status").text_content()
        assert "detected: English" in await page.get_by_test_id("status").text_content()

        # Without a gap marker the whole text is the left context (autocomplete).
        await page.get_by_test_id("context").fill(AUTOCOMPLETE_TEXT)
        changed = await api_results(base_url, AUTOCOMPLETE_TEXT, "", 4)
        assert [r["id"] for r in changed["results"]] != [r["id"] for r in expected["results"]]
        assert await settled_results(page) == shown_form(changed["results"])
        assert "to continue your text" in await page.get_by_test_id("status").text_content()

        # A chosen language is sent with the request instead of being guessed.
        await page.get_by_test_id("lang").select_option("zh")
        chinese = await api_results(base_url, AUTOCOMPLETE_TEXT, "", 4, lang="zh")
        assert chinese["lang"] == "zh"
        assert await settled_results(page) == shown_form(chinese["results"])
        assert "(Chinese)" in await page.get_by_test_id("status").text_content()

    in_browser(base_url, scenario)


def test_an_answer_to_older_text_that_arrives_late_is_dropped(base_url):
    async def scenario(page: Page, base_url: str) -> None:
        held, release = await hold_answers(page, GAP_LEFT)
        await page.get_by_test_id("context").fill(GAP_TEXT)
        await asyncio.wait_for(held.wait(), timeout=10)
        await page.get_by_test_id("context").fill(AUTOCOMPLETE_TEXT)
        newer = await api_results(base_url, AUTOCOMPLETE_TEXT, "", 5)
        older = await api_results(base_url, GAP_LEFT, GAP_RIGHT, 5)
        assert shown_form(older["results"]) != shown_form(newer["results"])  # showing it would be seen
        assert await settled_results(page) == shown_form(newer["results"])

        release.set()
        await answer_read(page, GAP_LEFT)
        assert await page.evaluate(SHOWN_RESULTS) == shown_form(newer["results"])
        assert await page.get_by_test_id("results").get_attribute("data-state") == "ready"

    in_browser(base_url, scenario)


def test_an_answer_that_arrives_while_newer_text_waits_to_be_sent_does_not_settle_the_page(base_url):
    async def scenario(page: Page, base_url: str) -> None:
        held, release = await hold_answers(page, GAP_LEFT)
        # The page's clock stands still until the test moves it on: only then does the debounce pause end.
        await page.clock.install(time=0)
        await page.clock.pause_at(PAUSE_MS)
        await page.get_by_test_id("context").fill(GAP_TEXT)
        await page.clock.run_for(PAUSE_MS)
        await asyncio.wait_for(held.wait(), timeout=10)
        # The newer text is typed, then the older answer arrives and is read within the debounce pause.
        await page.get_by_test_id("context").fill(AUTOCOMPLETE_TEXT)
        release.set()
        await answer_read(page, GAP_LEFT)
        assert await page.get_by_test_id("results").get_attribute("data-state") == "pending"
        await page.clock.run_for(PAUSE_MS)
        newer = await api_results(base_url, AUTOCOMPLETE_TEXT, "", 5)
        assert await settled_results(page) == shown_form(newer["results"])

    in_browser(base_url, scenario)


def test_errors_of_the_api_are_shown_readably_and_cleared_by_a_good_request(base_url):
    async def scenario(page: Page, base_url: str) -> None:
        error = page.get_by_test_id("error")
        # Neither Latin letters nor Chinese characters: the server cannot pick a language.
        await page.get_by_test_id("context").fill("1 2 3")
        await settled_results(page)
        assert await error.is_visible()
        assert "cannot tell the language of this text" in await error.text_content()
        assert await error.get_attribute("role") == "alert"
        assert await page.evaluate(SHOWN_RESULTS) == []

        await page.get_by_test_id("context").fill(GAP_TEXT)
        await page.get_by_test_id("k").fill("0")
        await settled_results(page)
        assert (await error.text_content()).strip() == "k: Input should be greater than or equal to 1"

        await page.get_by_test_id("k").fill("3")
        expected = await api_results(base_url, GAP_LEFT, GAP_RIGHT, 3)
        assert await settled_results(page) == shown_form(expected["results"])
        assert not await error.is_visible()

    in_browser(base_url, scenario)


def test_insert_puts_the_quote_into_the_gap(base_url):
    async def scenario(page: Page, base_url: str) -> None:
        await page.get_by_test_id("context").fill(GAP_TEXT)
        best = (await settled_results(page))[0]
        await page.get_by_test_id("result").first.get_by_role("button").click()
        # A full stop of the quote's goes: the writer's own follows the gap.
        inserted = GAP_LEFT + best["quote"].rstrip(".") + GAP_RIGHT
        assert await page.get_by_test_id("context").input_value() == inserted
        # The text changed, so the page ranks again, now for the text as a whole.
        expected = await api_results(base_url, inserted, "", 5)
        assert await settled_results(page) == shown_form(expected["results"])

    in_browser(base_url, scenario)


def test_insert_fits_the_quotes_final_punctuation_to_the_text_around_the_gap(punctuation_url):
    async def scenario(page: Page, base_url: str) -> None:
        context = page.get_by_test_id("context")
        for text, quote, expected in INSERTIONS:
            await context.fill(text)
            await settled_results(page)
            await page.get_by_role("button", name=f"Insert “{quote}” into your text", exact=True).click()
            assert await context.input_value() == expected
            # The caret is left right after the quote, where the text after the gap begins.
            after_gap = text.split("[]", 1)[1]
            assert await context.evaluate("(area) => area.selectionStart") == len(expected) - len(after_gap)

    in_browser(punctuation_url, scenario)


def test_an_answer_from_both_chinese_banks_tags_each_quote_with_its_bank(chinese_url):
    async def scenario(page: Page, base_url: str) -> None:
        await page.wait_for_function(LANGUAGES_LOADED)
        await page.get_by_test_id("context").fill(CHINESE_TEXT)
        merged = await api_results(base_url, CHINESE_TEXT, "", 5)
        assert merged["langs"] == ["zh", "zh-classical"]
        assert await settled_results(page) == shown_form(merged["results"])
        tags = {"zh": "modern", "zh-classical": "classical"}
        shown = await page.evaluate(SHOWN_BANKS)
        assert shown == [[r["lang"], tags[r["lang"]]] for r in merged["results"]]
        assert {lang for lang, _ in shown} == {"zh", "zh-classical"}  # two quotes a bank, five asked for
        assert await page.get_by_test_id("result-bank").first.is_visible()
        assert "(from Chinese and Classical Chinese)" in await page.get_by_test_id("status").text_content()

        # A chosen bank answers alone: one bank, no tags.
        await page.get_by_test_id("lang").select_option("zh-classical")
        named = await api_results(base_url, CHINESE_TEXT, "", 5, lang="zh-classical")
        assert await settled_results(page) == shown_form(named["results"])
        assert await page.evaluate(SHOWN_BANKS) == [["zh-classical", ""]] * len(named["results"])
        assert not await page.get_by_test_id("result-bank").first.is_visible()
        assert "(Classical Chinese)" in await page.get_by_test_id("status").text_content()

    in_browser(chinese_url, scenario)
