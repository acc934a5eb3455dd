"""Whether a preset's Hub models can be had right now, asked in a second instead of a minute.

transformers fetches a Hub model's files with retries: on a machine without a network (a lecture hall, a
sandbox) `from_pretrained` of a model that is not in the local cache spends about a minute retrying before it
fails. `unreachable` answers first: the model ids that are neither in the local cache nor fetchable, because the
Hub does not answer one request (`answers`: no connection, in a few seconds; no answer, or a status it retries on). A
model that *is* cached loads all the same, but transformers asks the Hub about each of its files first, retrying each
for half a minute (a cached pair: minutes);
`from_cache_alone` says when to load from the cache alone: the Hub asked once (`answers`) gave no answer, or a status
huggingface_hub retries on (429, 5xx). Offline mode (HF_HUB_OFFLINE) and a proxy (which may reach what this machine
cannot) skip the probe and leave the answer to transformers.
"""

from __future__ import annotations

import http.client
import os
import ssl
from collections.abc import Iterable
from urllib.parse import quote, urlparse

PROBE_SECONDS = 3.0
FETCH_PROBE_SECONDS = 10.0  # a model not cached: huggingface_hub's own wait for a first answer (HF_HUB_ETAG_TIMEOUT)
NOT_ANSWERED = {408, 429, 500, 502, 503, 504}  # the statuses huggingface_hub retries on (its http_backoff's default)
_TRUE = {"1", "on", "yes", "true"}
_PROXIES = ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy")


def is_cached(model_id: str, revision: str | None = None) -> bool:
    """Whether the model's config.json is in the local Hugging Face cache (then its weights are fetched the same way,
    and transformers says what is missing)."""
    from huggingface_hub import try_to_load_from_cache

    try:
        return isinstance(try_to_load_from_cache(model_id, "config.json", revision=revision), str)
    except ValueError:  # not a valid repository id: transformers will say so
        return True


def endpoint_problem() -> str | None:
    """What is wrong with $HF_ENDPOINT, in one line (None when it is unset or a URL): huggingface_hub reads it when it
    is imported, and one it cannot parse (a port out of range, a broken IPv6 address) stops that import, and with it
    transformers and gradio, with a traceback."""
    value = os.environ.get("HF_ENDPOINT")
    if not value:
        return None
    try:
        url = urlparse(value)
        url.port  # parsed when read: a port out of range raises here
    except ValueError as e:
        return f"HF_ENDPOINT={value!r} is not a URL ({e}): fix it (e.g. https://huggingface.co) or unset it"
    if url.scheme not in ("http", "https") or not url.hostname:
        return f"HF_ENDPOINT={value!r} is not an http(s) URL: fix it (e.g. https://huggingface.co) or unset it"
    return None


def _left_to_transformers() -> bool:
    """Offline mode (transformers reads the cache alone already) or a proxy (it may reach what this machine cannot)."""
    return os.environ.get("HF_HUB_OFFLINE", "").lower() in _TRUE or any(os.environ.get(p) for p in _PROXIES)


def from_cache_alone(models: Iterable[tuple[str, str | None]]) -> bool:
    """Whether the (model id, revision) pairs, one at least, are all in the local cache while the Hub does not answer
    (`answers`, asked of the first: a Space's `preload_from_hub` with the Hub down): then they load from the cache
    alone (`local_files_only`), where transformers asked the Hub about each file with retries (85 refused connections,
    minutes, for a tiny cached pair). The Hub is probed only then: a model not cached is fetched (or refused by
    `unreachable`) as before."""
    models = list(models)
    if not models or _left_to_transformers():
        return False
    return all(is_cached(model_id, revision) for model_id, revision in models) and not answers(*models[0])


def answers(model_id: str, revision: str | None = None, *, timeout: float = PROBE_SECONDS) -> bool:
    """Whether the Hub (HF_ENDPOINT, else huggingface.co) answers one request for the model's config.json (a HEAD,
    no retries, no redirect followed), as huggingface_hub asks first. Not when no connection opens, none answers in
    `timeout`, or it answers with a status huggingface_hub retries on (429, 5xx: a Hub whose host is up while it is
    down or overloaded, where a connection alone said reachable and a cached pair then took minutes of retries). A
    certificate this Python cannot check counts as answering: that is no outage, and transformers says what it says."""
    return silence(model_id, revision, timeout=timeout) is None


def silence(model_id: str, revision: str | None = None, *, timeout: float = PROBE_SECONDS) -> str | None:
    """Why the Hub does not answer `answers`' request, in words for a refusal: "cannot be reached" (no connection
    opened in PROBE_SECONDS, however long `timeout`: a network that drops packets is said as fast as a refused
    connection; no answer in `timeout`) or "answered 503" (a status huggingface_hub retries on); None where it
    answers."""
    url = urlparse(os.environ.get("HF_ENDPOINT") or "https://huggingface.co")
    path = f"{url.path.rstrip('/')}/{model_id}/resolve/{quote(revision or 'main', safe='')}/config.json"
    kind = http.client.HTTPSConnection if url.scheme == "https" else http.client.HTTPConnection
    connection = kind(url.hostname, url.port, timeout=min(timeout, PROBE_SECONDS))
    try:
        connection.connect()  # within PROBE_SECONDS (with TLS's handshake)
        connection.sock.settimeout(timeout)  # then `timeout` for the answer
        connection.request("HEAD", path, headers={"User-Agent": "specui"})
        status = connection.getresponse().status
        return f"answered {status}" if status in NOT_ANSWERED else None
    except ssl.SSLCertVerificationError:
        return None
    except (OSError, http.client.HTTPException):  # refused, no such host, timed out, the connection cut
        return "cannot be reached"
    finally:
        connection.close()


def unreachable(models: Iterable[tuple[str, str | None]]) -> list[str]:
    """Of the (model id, revision) pairs, the ids that are not cached while the Hub does not answer (`out_of_reach`)."""
    return out_of_reach(models)[0]


def out_of_reach(models: Iterable[tuple[str, str | None]]) -> tuple[list[str], str | None]:
    """Of the (model id, revision) pairs, the ids that are not cached while the Hub does not answer, and why (`silence`,
    asked of the first: "cannot be reached", "answered 503"), where a bare connection to its host said reachable and a
    Hub answering 5xx or 429 left from_pretrained to minutes of retries; ([], None) in offline mode or behind a proxy
    (transformers then says what it finds)."""
    if _left_to_transformers():
        return [], None
    missing = [(model_id, revision) for model_id, revision in models if not is_cached(model_id, revision)]
    why = silence(*missing[0], timeout=_fetch_wait()) if missing else None  # a slow Hub is no refusal
    return ([model_id for model_id, _ in missing], why) if why else ([], None)


def _fetch_wait() -> float:
    """How long huggingface_hub waits for the Hub's first answer: HF_HUB_ETAG_TIMEOUT where it is an int (as
    huggingface_hub reads it; a user on a slow link raises it for downloads to work), else FETCH_PROBE_SECONDS."""
    try:
        return int(os.environ.get("HF_HUB_ETAG_TIMEOUT", "")) or FETCH_PROBE_SECONDS
    except ValueError:
        return FETCH_PROBE_SECONDS
