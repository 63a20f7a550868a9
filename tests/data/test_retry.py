"""retry.py: which errors are transient, the waits (backoff, a capped Retry-After), the bounds on tries
and total wait, the bounds put on datasets' own retries, and the read timeout of requests sent without one."""

from __future__ import annotations

import socket
import threading
import time

import pytest
import yaml
from huggingface_hub import errors
from huggingface_hub.utils import httpx

from niels_gpt.config import SCHEMA_PATH
from niels_gpt.data import retry
from niels_gpt.data.retry import TRANSIENT, RetriesExhausted, RetryPolicy, classify

URL = "http://127.0.0.1:9/api/datasets/org/name/revision/main"


def is_transient(exc: BaseException) -> bool:
    return classify(exc) == TRANSIENT


def http_error(status: int, cls=errors.HfHubHTTPError, headers: dict | None = None):
    response = httpx.Response(status, headers=headers or {}, request=httpx.Request("GET", URL))
    return cls(f"{status} error for url {URL}", response=response)


def chained(outer: BaseException, inner: BaseException) -> BaseException:
    """`outer` raised while handling `inner`, as datasets re-raises (`from None` keeps the context)."""
    try:
        try:
            raise inner
        except BaseException:
            raise outer from None
    except BaseException as e:
        return e


@pytest.mark.parametrize("status", [408, 429, 500, 502, 503, 504])
def test_server_errors_and_rate_limits_are_transient(status):
    assert is_transient(http_error(status))


@pytest.mark.parametrize("status", [400, 401, 403, 404, 416])
def test_client_errors_are_permanent(status):
    assert not is_transient(http_error(status))


@pytest.mark.parametrize(
    "cls",
    [
        errors.RepositoryNotFoundError,
        errors.GatedRepoError,
        errors.RevisionNotFoundError,
        errors.RemoteEntryNotFoundError,
        errors.BadRequestError,
        errors.DisabledRepoError,
    ],
)
def test_not_found_gated_and_disabled_are_permanent_whatever_their_status(cls):
    assert not is_transient(http_error(503, cls))


@pytest.mark.parametrize(
    "exc",
    [
        httpx.ReadError("reset"),
        httpx.ReadTimeout("timed out"),
        httpx.RemoteProtocolError("peer closed"),
        httpx.ConnectError("refused"),
        ConnectionError("Server Disconnected"),
        TimeoutError(),
        OSError("Consistency check failed: file should be of size 10 but has size 5"),
    ],
)
def test_network_errors_are_transient(exc):
    assert is_transient(exc)


def test_permanent_dataset_errors_are_not_retried():
    import pyarrow as pa
    from datasets.exceptions import DatasetNotFoundError

    assert not is_transient(DatasetNotFoundError("Dataset 'x/y' doesn't exist on the Hub"))
    assert not is_transient(ValueError("BuilderConfig 'nope' not found. Available: ['default']"))
    assert not is_transient(ValueError("Bad split: validation. Available splits: ['train']"))
    assert not is_transient(pa.lib.ArrowInvalid("Parquet magic bytes not found in footer"))
    assert retry.classify(errors.OfflineModeIsEnabled("offline")) == retry.UNREACHABLE
    assert not is_transient(RetriesExhausted("load_dataset", 3, 1.0, ConnectionError("x")))


def test_readme_head_exhaustion_is_transient_unless_access_was_denied():
    message = (
        "Couldn't find any data file at /x. Couldn't find 'org/name' on the Hugging Face Hub either: "
        "LocalEntryNotFoundError: An error happened while trying to locate the file on the Hub"
    )
    assert is_transient(chained(FileNotFoundError(message), http_error(503)))
    assert not is_transient(chained(FileNotFoundError(message), http_error(403)))
    assert not is_transient(FileNotFoundError("/data/x.parquet: no such file"))


def test_a_wrapped_error_is_judged_by_its_cause():
    from datasets.exceptions import DatasetGenerationError

    assert is_transient(chained(DatasetGenerationError("An error occurred"), httpx.ReadError("reset")))
    assert not is_transient(chained(DatasetGenerationError("An error occurred"), ValueError("bad row")))


def test_backoff_doubles_up_to_its_cap():
    policy = RetryPolicy(backoff_s=2, max_backoff_s=10)
    assert [policy.wait(k) for k in range(1, 6)] == [2, 4, 8, 10, 10]


def test_retry_after_replaces_the_backoff_up_to_its_cap():
    policy = RetryPolicy(backoff_s=2, retry_after_cap_s=30)
    assert policy.wait(1, http_error(429, headers={"Retry-After": "7"})) == 7
    assert policy.wait(1, http_error(429, headers={"Retry-After": "3600"})) == 30
    date = time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(time.time() + 12))
    assert 9 <= policy.wait(1, http_error(503, headers={"Retry-After": date})) <= 12
    assert policy.wait(3, http_error(503)) == 8  # no header: the backoff


class FakeClock:
    """time.monotonic() that only a sleep moves."""

    def __init__(self):
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_call_retries_a_transient_error_then_returns(monkeypatch):
    sleeps, lines = [], []
    monkeypatch.setattr(retry.time, "sleep", sleeps.append)
    answers = iter([http_error(503), httpx.ReadError("reset"), "ok"])

    def flaky():
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return answer

    policy = RetryPolicy(attempts=3, backoff_s=1)
    assert retry.call(flaky, what="load_dataset", policy=policy, on_retry=lines.append) == "ok"
    assert sleeps == [1, 2]
    assert lines[0].startswith("load_dataset: HfHubHTTPError: 503 error") and "try 2 of 3 in 1 s" in lines[0]


def test_call_gives_up_after_its_attempts_with_the_last_error(monkeypatch):
    clock = FakeClock()
    monkeypatch.setattr(retry.time, "sleep", clock.sleep)
    monkeypatch.setattr(retry.time, "monotonic", clock.monotonic)
    calls = []

    def down():
        calls.append(1)
        raise http_error(503)

    with pytest.raises(RetriesExhausted, match=r"load_dataset: the hub still failed after 4 tries .*503") as info:
        retry.call(down, what="load_dataset", policy=RetryPolicy(attempts=4), on_retry=lambda m: None)
    assert len(calls) == 4 and info.value.tries == 4 and info.value.waited_s == 2 + 4 + 8
    assert isinstance(info.value.__cause__, errors.HfHubHTTPError)


def test_call_stops_before_a_wait_would_pass_max_wait(monkeypatch):
    clock = FakeClock()
    monkeypatch.setattr(retry.time, "sleep", clock.sleep)
    monkeypatch.setattr(retry.time, "monotonic", clock.monotonic)
    calls = []

    def down():
        calls.append(1)
        raise ConnectionError("down")

    policy = RetryPolicy(attempts=10, backoff_s=1, max_wait_s=5)  # waits 1 + 2, then 4 would pass 5
    with pytest.raises(RetriesExhausted) as info:
        retry.call(down, what="x", policy=policy, on_retry=lambda m: None)
    assert len(calls) == 3 and info.value.waited_s == 3


def test_calls_clock_starts_at_the_first_failure_the_library_saw(monkeypatch):
    """A read the library already retried for 4 s has 1 s of a 5 s deadline left: no 2 s wait of ours."""
    clock = FakeClock()
    monkeypatch.setattr(retry.time, "sleep", clock.sleep)
    monkeypatch.setattr(retry.time, "monotonic", clock.monotonic)
    error = http_error(503)
    key = retry._key(error.response.request)
    retry.FAILURES.failed(key)
    clock.now += 4
    try:
        with pytest.raises(RetriesExhausted) as info:
            retry.call(lambda: (_ for _ in ()).throw(error), what="x", policy=RetryPolicy(backoff_s=2, max_wait_s=5))
    finally:
        retry.FAILURES.ok(key)
    assert info.value.tries == 1 and info.value.waited_s == 4


def test_call_raises_a_permanent_error_at_once():
    from datasets.exceptions import DatasetNotFoundError

    calls = []

    def missing():
        calls.append(1)
        raise DatasetNotFoundError("no such dataset")

    with pytest.raises(DatasetNotFoundError):
        retry.call(missing, what="x", policy=RetryPolicy(attempts=5), on_retry=lambda m: None)
    assert calls == [1]


def test_the_policy_is_the_config_section_hub():
    """Every key of the schema's `hub` section but checkpoint_tokens is a RetryPolicy field with the same default."""
    schema = yaml.safe_load(SCHEMA_PATH.read_text())
    section = schema["properties"]["hub"]["properties"]
    defaults = {key: node["default"] for key, node in section.items() if key != "checkpoint_tokens"}
    assert RetryPolicy.from_config({**defaults, "checkpoint_tokens": 5}) == RetryPolicy() == RetryPolicy(**defaults)
    assert RetryPolicy.from_config({"attempts": 2}).attempts == 2


@pytest.fixture
def restore_hub_settings(monkeypatch):
    """`configure` changes process-wide settings: the next hub read of the suite configures its own."""
    import datasets.config as dc
    from huggingface_hub.utils import set_client_factory

    names = [n for n in dir(dc) if n.startswith("STREAMING_") and ("RETRIES" in n or "INTERVAL" in n)]
    for name in names:
        monkeypatch.setattr(dc, name, getattr(dc, name))  # restored after the test
    from huggingface_hub.utils import get_session

    template = retry._template(get_session)  # the library's own client, before any configure
    policy = retry._settings.get("policy")
    yield names
    retry.FAILURES.clear()
    retry._settings.pop("policy", None)
    if policy is not None:
        retry.configure(policy)
    else:
        set_client_factory(lambda: type(template)(event_hooks=template.event_hooks, follow_redirects=True))


def test_datasets_streaming_retries_are_bounded_by_the_policy(restore_hub_settings):
    import datasets.config as dc

    retry.configure(RetryPolicy(stream_read_retries=2, stream_retry_interval_s=0.5))
    assert dc.STREAMING_READ_MAX_RETRIES == dc.STREAMING_OPEN_MAX_RETRIES == 2
    assert {getattr(dc, n) for n in restore_hub_settings if "INTERVAL" in n} == {0.5}


def test_the_settings_are_applied_once_per_process(restore_hub_settings, monkeypatch):
    from huggingface_hub import utils

    calls = []
    monkeypatch.setattr(utils, "set_client_factory", lambda f: calls.append(f))
    policy = RetryPolicy(attempts=4)
    for _ in range(3):
        retry.configure(policy)
    retry.configure(RetryPolicy(attempts=5))
    assert len(calls) == 2


@pytest.fixture
def silent_server():
    """A loopback socket that accepts connections and never answers (a stalled hub)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    stop, conns = threading.Event(), []

    def accept():
        sock.settimeout(0.05)
        while not stop.is_set():
            try:
                conns.append(sock.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    stop.set()
    thread.join()
    for c in conns:
        c.close()
    sock.close()


def test_a_request_sent_without_a_timeout_gets_the_policys(silent_server, restore_hub_settings):
    """huggingface_hub sends the tree listing with timeout=None: a stall would hang for ever."""
    from huggingface_hub.utils import get_session

    retry.configure(RetryPolicy(request_timeout_s=0.3))
    start = time.monotonic()
    with pytest.raises(httpx.ReadTimeout):
        get_session().get(f"{silent_server}/api/datasets/org/name/tree/main", timeout=None)
    assert time.monotonic() - start < 3
    with pytest.raises(httpx.ReadTimeout):  # an explicit timeout is kept
        get_session().get(silent_server, timeout=0.1)


def test_a_host_name_that_does_not_resolve_is_unreachable_at_once(restore_hub_settings, monkeypatch):
    from huggingface_hub.utils import get_session, http_backoff

    def no_dns(*args, **kwargs):
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    monkeypatch.setattr(socket, "getaddrinfo", no_dns)
    retry.configure(RetryPolicy())
    start = time.monotonic()
    with pytest.raises(retry.HubUnreachable) as info:
        http_backoff("GET", "http://hub.invalid/api/datasets/org/name")  # the library's own 6 tries: none here
    assert time.monotonic() - start < 5 and retry.classify(info.value) == retry.UNREACHABLE  # the library: 23 s
    assert "hub.invalid" in str(info.value)
    assert get_session() is not None


def test_a_hub_failing_for_good_is_given_up_within_max_wait(restore_hub_settings):
    """Every request answered 503: huggingface_hub's own tries (1, 2, 4 s apart) and ours stop within
    max_wait_s of the first failure, measured with the real clock."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from huggingface_hub.utils import http_backoff

    answer = [503]

    class Down(BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(answer[0])
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Down)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/api/datasets/org/name/tree/main"
    policy = RetryPolicy(attempts=6, backoff_s=0.5, max_wait_s=2.5, request_timeout_s=1)
    retry.configure(policy)
    start = time.monotonic()
    try:
        with pytest.raises(RetriesExhausted) as info:
            retry.call(lambda: http_backoff("GET", url).raise_for_status(), what="x", policy=policy, on_retry=print)
        elapsed = time.monotonic() - start
        answer[0] = 200  # the hub is back: a later read of the same URL is not refused for the one that gave up
        time.sleep(policy.max_wait_s - elapsed + 0.5 if elapsed < policy.max_wait_s else 0.5)
        assert http_backoff("GET", url).status_code == 200
    finally:
        server.shutdown()
    # without the deadline: 6 tries of ours, each after the library's 6 tries over 1+2+4+8+8 s
    assert elapsed <= policy.max_wait_s + policy.request_timeout_s, elapsed
    assert info.value.waited_s <= policy.max_wait_s
