"""The Teach tab's servers and browser, once for every test file of this folder (package fixtures: they close once the
folder's last test has run): `browser`, one Chromium; `app`, (showcase, URL) of a small app of the Teach tab alone;
`site`, (showcase, URL) of the whole app on the same kind of tiny pair. Each file opens its own pages on them (a new
context each: a new gradio session, nothing of another file's left), so no file depends on another's order."""

from __future__ import annotations

import pytest

from tests.app.teach_page import teach_app, tiny_showcase
from tests.helpers import served_app, static_browser


@pytest.fixture(scope="package")
def browser():
    with static_browser() as browser:  # Chromium (skips, or fails under CI=true, without it)
        yield browser


@pytest.fixture(scope="package")
def app(browser, tmp_path_factory):
    """A Blocks app of the Teach tab alone over a tiny random pair (so the tests do not wait for the bundled pair)."""
    showcase = tiny_showcase(tmp_path_factory.mktemp("teach-pair"))
    with teach_app(showcase) as url:
        yield showcase, url


@pytest.fixture(scope="package")
def site(browser, tmp_path_factory):
    """The whole app (Chat and Teach) served on a tiny pair of its own: (showcase, its URL)."""
    showcase = tiny_showcase(tmp_path_factory.mktemp("site-pair"))
    with served_app(showcase.config, showcase=showcase) as url:
        yield showcase, url
