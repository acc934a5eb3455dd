"""A Hub model that is not in the local cache while the Hub is down or overloaded (its host up, every request answered
5xx or 429): refused before loading in one line that says what the Hub answered and what to do, where a bare
connection to its host said reachable and from_pretrained then spent minutes in retries. The Hub is a local HTTP
server that answers every request with one status (tests/unit/test_spaces_cached_hub.py's)."""

from __future__ import annotations

import pytest

from specui import hub
from specui.load_checks import HubUnreachableError, LoadError, check_before_loading
from specui.presets import parse_config
from tests.unit.test_spaces_cached_hub import answering

MODEL = "specui-test/never-cached-model"


def _preset(tmp_path):
    return parse_config({"presets": {"own": {"target": MODEL}}}, path=tmp_path / "models.yaml").get("own")


@pytest.fixture
def online(monkeypatch):
    """Neither offline mode nor a proxy (each leaves the answer to transformers), nor a Space."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    for name in (*hub._PROXIES, "SPACE_ID"):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


@pytest.mark.parametrize("status", [503, 429])
def test_a_hub_answering_an_outage_is_said_in_one_line_before_loading(tmp_path, online, status):
    with answering(status) as endpoint:
        online.setenv("HF_ENDPOINT", endpoint)
        with pytest.raises(HubUnreachableError) as refused:
            check_before_loading(_preset(tmp_path))
        assert answering.asked == [f"HEAD /{MODEL}/resolve/main/config.json"]  # one request, no retries
    said = str(refused.value)
    assert said.startswith(f"Preset 'own' needs {MODEL} from the Hugging Face Hub, which answered {status} (down or "
                           "overloaded), and it is not in the local cache: try again later, or use a cached or local "
                           "model."), said
    assert "\n" not in said and "cannot reach" not in said


def test_on_a_space_an_outage_says_to_try_again_or_set_the_preset(tmp_path, online):
    online.setenv("SPACE_ID", "someone/specui")
    with answering(502) as endpoint:
        online.setenv("HF_ENDPOINT", endpoint)
        with pytest.raises(HubUnreachableError) as refused:
            check_before_loading(_preset(tmp_path))
    said = str(refused.value)
    assert "which answered 502 (down or overloaded)" in said and ": try again later, or set the Space's variable " \
        "SPECUI_PRESET" in said and "HF_TOKEN" not in said, said


def test_a_hub_that_answers_is_left_to_transformers(tmp_path, online):
    """A Hub that answers (a model it has not: 404; a gated one: 401) is no outage: transformers says what it says."""
    for status in (404, 401, 200):
        with answering(status) as endpoint:
            online.setenv("HF_ENDPOINT", endpoint)
            check_before_loading(_preset(tmp_path))
            assert hub.out_of_reach([(MODEL, None)]) == ([], None)


def test_a_host_that_refuses_connections_is_still_out_of_reach(tmp_path, online):
    from tests.unit.test_spaces_cached_hub import refused_port

    online.setenv("HF_ENDPOINT", f"http://127.0.0.1:{refused_port()}")
    assert hub.out_of_reach([(MODEL, "v1")]) == ([MODEL], "cannot be reached")
    with pytest.raises(LoadError, match="which this machine cannot reach, and it is not in the local cache: connect "
                                        "once to download"):
        check_before_loading(_preset(tmp_path))


def test_the_probe_opens_its_connection_in_seconds_and_waits_longer_for_the_answer(tmp_path, online):
    """A model not cached gives the Hub 10 s to answer (hub.FETCH_PROBE_SECONDS, as huggingface_hub waits), but that
    wait also bounded the connection's opening: on a network that drops packets (a firewall, a sandbox) the refusal
    came after 10 s, where the connection alone had said it in 3 (hub.PROBE_SECONDS). The connection opens within
    PROBE_SECONDS and the answer is waited for FETCH_PROBE_SECONDS: the socket's timeouts, read from the real socket
    each connection opened (a network that drops packets, by hand: about 3 s, was about 10)."""
    import socket

    opened = []
    real = socket.create_connection

    def recorded(address, timeout=None, *args, **kwargs):
        opened.append((timeout, real(address, timeout, *args, **kwargs)))
        return opened[-1][1]

    online.setattr(socket, "create_connection", recorded)
    with answering(503) as endpoint:
        online.setenv("HF_ENDPOINT", endpoint)
        assert hub.out_of_reach([(MODEL, None)]) == ([MODEL], "answered 503")
        assert hub.answers(MODEL) is False
    assert [(opening, sock.gettimeout()) for opening, sock in opened] == \
        [(hub.PROBE_SECONDS, hub.FETCH_PROBE_SECONDS), (hub.PROBE_SECONDS, hub.PROBE_SECONDS)]


def test_a_longer_wait_the_user_gave_huggingface_hub_is_the_probes_too(tmp_path, online):
    """HF_HUB_ETAG_TIMEOUT=60, set for a slow link so that downloads work: huggingface_hub waits 60 s for the Hub's
    first answer, and the probe, which waited 10 s whatever it said, refused as out of reach a model transformers
    would have fetched. It waits what huggingface_hub waits (an int, as huggingface_hub reads it; else 10 s)."""
    import socket

    opened = []
    real = socket.create_connection

    def recorded(address, timeout=None, *args, **kwargs):
        opened.append(real(address, timeout, *args, **kwargs))
        return opened[-1]

    online.setattr(socket, "create_connection", recorded)
    with answering(404) as endpoint:
        online.setenv("HF_ENDPOINT", endpoint)
        for value in ("60", "not a number"):
            online.setenv("HF_HUB_ETAG_TIMEOUT", value)
            assert hub.out_of_reach([(MODEL, None)]) == ([], None)
    assert [sock.gettimeout() for sock in opened] == [60, hub.FETCH_PROBE_SECONDS]
