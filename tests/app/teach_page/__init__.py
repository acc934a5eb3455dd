"""The Teach tab in a real browser, shared by this folder's test files (conftest.py's package fixtures: one Chromium,
one Teach-only app and one whole app on a tiny pair, where each file started its own server and browser). Each file
opens pages of its own (a new browser context: a new gradio session) on them. The shared prompt, pair and waits are
here."""

from __future__ import annotations

import contextlib

from tests.waits import click_and_wait
from tools.screenshot import set_number

PROMPT = "def add(a, b):\n    return a + b\n\ndef add(a, b):\n"
K = 4  # the tiny pair's preset K


def tiny_showcase(root, *, more: str = ""):
    """A Showcase whose one preset is a tiny random pair saved under `root` (loads in a moment); `more`: models.yaml's
    lines of other presets after it (under `presets:`, indented as its are)."""
    from specui.loading import PairCache
    from specui.presets import load_config
    from specui.ui.session import Showcase
    from tests.helpers import make_model, noisy_copy, save_tiny_model

    target = make_model("llama", layers=2, seed=0)
    save_tiny_model(root / "target", "llama", layers=2, seed=0, model=target)
    save_tiny_model(root / "draft", "llama", layers=1, seed=1, model=noisy_copy(target, noise=0.1, seed=1))
    (root / "models.yaml").write_text(f"default: tiny\npresets:\n  tiny:\n    target: {root / 'target'}\n"
                                      f"    draft: {root / 'draft'}\n    dtype: float32\n    device: cpu\n"
                                      f"    num_draft_tokens: {K}\n{more}")
    return Showcase(load_config(root / "models.yaml"), PairCache())


@contextlib.contextmanager
def teach_app(showcase):
    """A Blocks app of the Teach tab alone over `showcase`, served in this process: yields its URL (in
    tests/gradio_calls.SERVED while it serves, for `wait_quiet`)."""
    import gradio as gr

    from specui.ui.blocks import launch
    from specui.ui.teaching import teaching_tab
    from tests.gradio_calls import SERVED
    from tools.screenshot import NO_PROBE, free_port

    with gr.Blocks(title="specui teaching test") as demo:
        teaching_tab(showcase)
    demo.queue(default_concurrency_limit=4)
    port = free_port()
    launch(demo, server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True, **NO_PROBE)
    url = f"http://127.0.0.1:{port}/"
    SERVED[url] = demo
    try:
        yield url
    finally:
        SERVED.pop(url, None)
        demo.close()


@contextlib.contextmanager
def teach_page(browser, url: str, *, width: int = 1400, height: int = 1000, **context):
    """A page of its own (a new context on the package's Chromium) on the served Teach tab once its scripts have run
    (`open_page`; its gradio calls tracked), its dialogs noted in `page.dialogs` (and dismissed) from before it loads;
    closed after."""
    from tests.helpers import open_page

    context.setdefault("viewport", {"width": width, "height": height})
    page = open_page(browser, url, ready="#step-start", tracked=True, dialogs=True, **context)
    try:
        yield page
    finally:
        page.context.close()


@contextlib.contextmanager
def lesson_page(browser, url: str):
    """A Teach page at a projector's 1280 x 720 with a lesson decoded (32 tokens of PROMPT), the focus off the prompt
    box: the keys' and the events' order tests start from it."""
    with teach_page(browser, url, width=1280, height=720) as page:
        decode_lesson(page, PROMPT, new_tokens=32)
        page.locator("#step-status").click()
        yield page


def wait_round(page, n: int, *, timeout_ms: int = 30_000) -> None:
    try:
        page.wait_for_selector(f"#step-view .teach-step[data-round='{n}']", timeout=timeout_ms)
    except Exception as e:
        raise AssertionError(f"round {n} never showed: view={page.locator('#step-view').inner_text()[:400]!r} "
                             f"status={page.locator('#step-status').inner_text()!r}") from e


def decode_lesson(page, prompt: str, *, new_tokens: int) -> None:
    """Decode `prompt` greedily with one draft a round (rounds enough to step through) and wait for round 1."""
    page.fill("#teach-prompt textarea", prompt)
    set_number(page, "teach-k", 1)
    set_number(page, "teach-temperature", 0)
    set_number(page, "teach-max-new-tokens", new_tokens)
    click_and_wait(page, "#step-start", "#step-status")
    wait_round(page, 1)


def shown_rows(page) -> list[dict]:
    return page.evaluate("""() => [...document.querySelectorAll('#step-view tr.teach-draft')].map(r => ({
        token: +r.dataset.token, q: parseFloat(r.dataset.q), p: r.dataset.p === '' ? null : parseFloat(r.dataset.p),
        accept: r.dataset.accept === '' ? null : parseFloat(r.dataset.accept),
        u: r.dataset.u === '' ? null : parseFloat(r.dataset.u),
        verdict: r.dataset.verdict, cells: [...r.querySelectorAll('td')].map(td => td.textContent)}))""")
