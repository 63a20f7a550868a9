"""The project's retry policy for hub reads: one error classifier, one deadline, the waits between tries.

`classify(exc)` sorts every failure of a hub call or read, along its cause chain, into
- UNREACHABLE: the hub's host name does not resolve (no network, a typo in HF_ENDPOINT) or offline mode is
  on: never retried, the job stops at once with the demo hint;
- TRANSIENT: HfHubHTTPError 408/429/5xx (not its not-found / gated / disabled / bad-request subclasses),
  httpx transport errors, ConnectionError / TimeoutError, a truncated download ("Consistency check failed"),
  a request refused by the deadline: retried;
- PERMANENT: anything else (a missing dataset, config, split or revision, a 401/403, bad data): raised as is.

The deadline (`hub.max_wait_s`): from the first failure of one read, whatever layer is retrying it, the
read gives up within `max_wait_s` plus one request timeout. Two layers retry a hub read:
- huggingface_hub's `http_backoff` (6 tries, 1-8 s apart, a 429's Retry-After + 1 s): `configure` gives it
  a client (`set_client_factory`) that sees every request and knows since when its URL fails: past
  `max_wait_s`, or when the library's next wait would pass it, `DeadlineExceeded` (not retried there); a
  host name that does not resolve: `HubUnreachable`; no read timeout (the tree listing): `request_timeout_s`;
- ours, `call(fn, policy)`: `hub.open_dataset` retries `load_dataset`, `resumable.ShuffledStream` re-opens a
  streamed file at the row it had reached. Up to `attempts` tries, waits backoff_s * 2**k (at most
  max_backoff_s; a 429's Retry-After instead, up to retry_after_cap_s); its clock starts at the first
  failure of the read (the library's included); a wait that would pass `max_wait_s` is not taken:
  `RetriesExhausted` (and the read's failures are forgotten: a later read starts its own clock).
`configure(policy)` applies the policy to the libraries once per process (again only when it changes):
the client above and datasets' streaming retry constants (`stream_read_retries`, `stream_retry_interval_s`).
"""

from __future__ import annotations

import email.utils
import importlib
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any, TypeVar

from niels_gpt.log import log

T = TypeVar("T")

TRANSIENT, UNREACHABLE, PERMANENT = "transient", "unreachable", "permanent"
TRANSIENT_STATUS = (408, 429, 500, 502, 503, 504)  # huggingface_hub's own retry list (http_backoff)
CONSISTENCY = "Consistency check failed"  # huggingface_hub: a download shorter than its announced size
# http_backoff's documented defaults (base_wait_time=1, max_wait_time=8, max_retries=5): the wait it takes
# after its n-th failed try of one call is min(8, 2**(n-1)) s, or a 429's Retry-After + 1 s
LIBRARY_BASE_WAIT_S, LIBRARY_MAX_WAIT_S, LIBRARY_TRIES = 1.0, 8.0, 6
_CHAIN_DEPTH = 20  # links of an error chain looked at (a cycle or a very long chain stops there)


@dataclass(frozen=True)
class RetryPolicy:
    """The config section `hub` (config_schema.yaml describes each key); never changes what is built."""

    attempts: int = 6
    backoff_s: float = 2.0
    max_backoff_s: float = 60.0
    max_wait_s: float = 600.0
    retry_after_cap_s: float = 120.0
    request_timeout_s: float = 60.0
    stream_read_retries: int = 3
    stream_retry_interval_s: float = 5.0

    @classmethod
    def from_config(cls, section: dict | None) -> RetryPolicy:
        """The policy of config section `hub` (keys this class lacks, e.g. checkpoint_tokens, are not its)."""
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in (section or {}).items() if k in names})

    def wait(self, retry: int, exc: BaseException | None = None) -> float:
        """Seconds before retry number `retry` (1 = the second try): a 429's Retry-After up to the cap,
        else backoff_s * 2**(retry-1) up to max_backoff_s."""
        after = retry_after(exc)
        if after is not None:
            return min(max(after, 0.0), self.retry_after_cap_s)
        return min(self.backoff_s * 2 ** (retry - 1), self.max_backoff_s)


class RetriesExhausted(ConnectionError):
    """A transient hub error that outlasted the policy: `what`, `tries`, `waited_s` (since the read's
    first failure), the last error."""

    def __init__(self, what: str, tries: int, waited_s: float, last: BaseException):
        self.what, self.tries, self.waited_s, self.last = what, tries, waited_s, last
        status = next((status_of(e) for e in cause_chain(last) if status_of(e) is not None), None)
        http = f"HTTP {status}; " if status is not None else ""
        super().__init__(
            f"{what}: the hub still failed after {tries} tries and {waited_s:.0f} s since the first failure "
            f"({http}last error: {type(last).__name__}: {short(last)})"
        )


class DeadlineExceeded(ConnectionError):
    """A hub request refused by the client: its URL has failed since `since` (time.monotonic()) and
    another try would pass `hub.max_wait_s`. Not an httpx error, so huggingface_hub does not retry it."""

    def __init__(self, message: str, since: float, key: str, response: Any = None):
        super().__init__(message)
        self.since, self.key = since, key
        self.response = response  # the failed answer, if any (its Retry-After counts)


class HubUnreachable(ConnectionError):
    """The hub's host name does not resolve (no network, or a wrong HF_ENDPOINT): waiting does not help."""


def short(exc: BaseException, limit: int = 200) -> str:
    """The first line of `exc`'s message, at most `limit` characters."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return text if len(text) <= limit else text[: limit - 3] + "..."


def cause_chain(exc: BaseException | None):
    """`exc`, then its causes/contexts (suppressed ones too: datasets re-raises `from None`)."""
    depth = 0
    while exc is not None and depth < _CHAIN_DEPTH:
        yield exc
        exc = exc.__cause__ or exc.__context__
        depth += 1


def status_of(exc: BaseException) -> int | None:
    response = getattr(exc, "response", None)
    return getattr(response, "status_code", None)


def retry_after(exc: BaseException | None) -> float | None:
    """Seconds of a 429/503 answer's Retry-After header (a number or an HTTP date), anywhere in the chain."""
    for e in cause_chain(exc):
        after = _retry_after_header(getattr(getattr(e, "response", None), "headers", None))
        if after is not None:
            return after
    return None


def _retry_after_header(headers: Any) -> float | None:
    value = headers.get("Retry-After") if headers is not None else None
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        when = email.utils.parsedate_to_datetime(value) if value else None
        return max(0.0, when.timestamp() - time.time()) if when else None


def _permanent_types() -> tuple[type[BaseException], ...]:
    from datasets.exceptions import DataFilesNotFoundError, DatasetNotFoundError
    from huggingface_hub import errors

    hub = (errors.RepositoryNotFoundError, errors.RevisionNotFoundError, errors.RemoteEntryNotFoundError)  # gated too
    return (DatasetNotFoundError, DataFilesNotFoundError, *hub, errors.BadRequestError, errors.DisabledRepoError)


def _transport_error_types() -> tuple[type[BaseException], ...]:
    """httpx's TransportError of the client huggingface_hub uses (httpx, or httpx2 from huggingface_hub 2)."""
    from huggingface_hub.utils import get_session

    module = importlib.import_module(type(_template(get_session)).__module__.split(".")[0])
    return (module.TransportError,)


def classify(exc: BaseException) -> str:
    """TRANSIENT, UNREACHABLE or PERMANENT (the module docstring), judged along `exc`'s cause chain."""
    from huggingface_hub import constants
    from huggingface_hub.errors import HfHubHTTPError, OfflineModeIsEnabled

    chain = list(cause_chain(exc))
    if any(isinstance(e, (OfflineModeIsEnabled, HubUnreachable, socket.gaierror)) for e in chain):
        return UNREACHABLE
    if constants.HF_HUB_OFFLINE and any(isinstance(e, ConnectionError) for e in chain):
        return UNREACHABLE  # datasets re-raises offline mode as a bare ConnectionError: the constant says it
    permanent, transport = (*_permanent_types(), RetriesExhausted), _transport_error_types()
    for e in chain:
        if isinstance(e, permanent):
            return PERMANENT
        if isinstance(e, HfHubHTTPError):
            return TRANSIENT if status_of(e) in TRANSIENT_STATUS else PERMANENT
        if isinstance(e, transport + (ConnectionError, TimeoutError)):
            return TRANSIENT
        if isinstance(e, OSError) and str(e).startswith(CONSISTENCY):
            return TRANSIENT
    return PERMANENT


def call(
    fn: Callable[[], T],
    *,
    what: str,
    policy: RetryPolicy,
    on_retry: Callable[[str], None] = log,
    failure: Callable[[BaseException], str] | None = None,
) -> T:
    """`fn()`, tried again after a TRANSIENT error by `policy`; any other error is raised as it is, and
    the last transient one, once the tries run out or the next wait would pass `max_wait_s` since the
    read's first failure, as RetriesExhausted. Each retry is announced to `on_retry` as
    "{what}: {failure(error)}; try k of n in s s" (default failure: the error's type and first line)."""
    first = None
    for attempt in range(1, policy.attempts + 1):
        try:
            return fn()
        except Exception as e:
            if classify(e) != TRANSIENT:
                raise
            now = time.monotonic()
            first = min(x for x in (first, failing_since(e), now) if x is not None)
            pause = policy.wait(attempt, e)
            if attempt == policy.attempts or now + pause - first > policy.max_wait_s:
                forget(e)  # this read is over: a later read of the same files starts its own clock
                raise RetriesExhausted(what, attempt, now - first, e) from e
            reason = failure(e) if failure is not None else f"{type(e).__name__}: {short(e, 120)}"
            on_retry(f"{what}: {reason}; try {attempt + 1} of {policy.attempts} in {pause:g} s")
            time.sleep(pause)
    raise AssertionError("unreachable: attempts >= 1")


# ------------------------------------------------------------------------- the libraries' side


class _Failures:
    """Since when each request (method and URL) has been failing, and how many times in a row; a success
    forgets it. Shared by every thread of the process."""

    def __init__(self):
        self._lock = threading.Lock()
        self._since: dict[str, tuple[float, int]] = {}

    def failed(self, key: str) -> tuple[float, int]:
        with self._lock:
            since, n = self._since.get(key, (time.monotonic(), 0))
            self._since[key] = (since, n + 1)
            return since, n + 1

    def ok(self, key: str) -> None:
        with self._lock:
            self._since.pop(key, None)

    def since(self, key: str) -> float | None:
        with self._lock:
            entry = self._since.get(key)
        return entry[0] if entry else None

    def clear(self) -> None:
        with self._lock:
            self._since.clear()


FAILURES = _Failures()
_settings: dict[str, Any] = {}  # what `configure` applied: {"policy": RetryPolicy, "template": client}


def _key(request: Any) -> str:
    return f"{request.method} {request.url}"


def _keys(exc: BaseException) -> list[str]:
    """The requests (method and URL) that failed in `exc`'s chain."""
    keys = []
    for e in cause_chain(exc):
        if isinstance(e, DeadlineExceeded):
            keys.append(e.key)
        request = getattr(getattr(e, "response", None), "request", None)
        if request is not None:
            keys.append(_key(request))
    return keys


def forget(exc: BaseException) -> None:
    """Forget the failures of the requests in `exc`'s chain (a read that gave up on them)."""
    for key in _keys(exc):
        FAILURES.ok(key)


def failing_since(exc: BaseException) -> float | None:
    """The earliest time (time.monotonic()) since which a request in `exc`'s chain has been failing."""
    times = [e.since for e in cause_chain(exc) if isinstance(e, DeadlineExceeded)]
    times += [t for t in map(FAILURES.since, _keys(exc)) if t is not None]
    return min(times) if times else None


def _library_wait(n: int, response: Any) -> float:
    """The wait huggingface_hub takes after its n-th failed try of one call (0 after its last try)."""
    if n % LIBRARY_TRIES == 0:
        return 0.0
    after = _retry_after_header(getattr(response, "headers", None))
    if after is not None:
        return after + 1
    return min(LIBRARY_BASE_WAIT_S * 2 ** (n % LIBRARY_TRIES - 1), LIBRARY_MAX_WAIT_S)


def _guard(request: Any, *, failed: BaseException | None = None, response: Any = None) -> None:
    """After a try of `request` (`failed`: its error, `response`: its answer): remember a failure, and
    raise DeadlineExceeded when the library's next wait would pass `max_wait_s` since its first failure."""
    policy: RetryPolicy = _settings["policy"]
    key = _key(request)
    if failed is None and (response is None or response.status_code not in TRANSIENT_STATUS):
        FAILURES.ok(key)
        return
    since, n = FAILURES.failed(key)
    waited = time.monotonic() - since
    if waited + _library_wait(n, response) > policy.max_wait_s:
        what = failed if failed is not None else f"HTTP {response.status_code}"
        raise DeadlineExceeded(
            f"{request.method} {request.url}: failing for {waited:.0f} s ({n} tries; last: {what}); "
            f"hub.max_wait_s={policy.max_wait_s:g} s leaves no room for another try",
            since,
            key,
            response,
        )


def _client_class(base: type) -> type:
    """A subclass of huggingface_hub's client class whose `send` (every request, streamed or not) keeps
    the deadline and turns a name that does not resolve into HubUnreachable."""

    class GuardedClient(base):
        def send(self, request, **kwargs):
            since = FAILURES.since(_key(request))
            policy: RetryPolicy = _settings["policy"]
            if since is not None and time.monotonic() - since > policy.max_wait_s:
                raise DeadlineExceeded(
                    f"{request.method} {request.url}: failing for more than hub.max_wait_s={policy.max_wait_s:g} s",
                    since,
                    _key(request),
                )
            try:
                response = super().send(request, **kwargs)
            except Exception as e:
                if any(isinstance(c, socket.gaierror) for c in cause_chain(e)):
                    unreachable = HubUnreachable(f"cannot resolve the hub's host {request.url.host!r}: {short(e)}")
                    _settings["unreachable"] = unreachable
                    raise unreachable from e
                _guard(request, failed=e)
                raise
            try:
                _guard(request, response=response)
            except DeadlineExceeded:
                response.close()
                raise
            return response

    return GuardedClient


def take_unreachable() -> HubUnreachable | None:
    """The last HubUnreachable the client raised since the previous call (datasets may have swallowed it)."""
    return _settings.pop("unreachable", None)


def _default_read_timeout(seconds: float) -> Callable[[Any], None]:
    def hook(request) -> None:
        timeout = dict(request.extensions.get("timeout") or {})
        if timeout.get("read") is None:
            timeout.update({k: seconds for k in ("connect", "read", "write", "pool") if timeout.get(k) is None})
            request.extensions["timeout"] = timeout

    return hook


def _template(get_session: Callable[[], Any]) -> Any:
    """The client huggingface_hub built before `configure` replaced its factory (its settings are copied)."""
    if "template" not in _settings:
        _settings["template"] = get_session()
    return _settings["template"]


def configure(policy: RetryPolicy) -> None:
    """Apply `policy` to the libraries, once per process (again only when it changes): huggingface_hub's
    client (the deadline, the request timeout, HubUnreachable) and datasets' streaming retry bounds."""
    if _settings.get("policy") == policy:
        return
    import datasets.config as dc
    from huggingface_hub.utils import get_session, set_client_factory

    template = _template(get_session)
    cls = _client_class(type(template))
    hooks = {name: list(fns) for name, fns in template.event_hooks.items()}
    hooks["request"] = [*hooks.get("request", []), _default_read_timeout(policy.request_timeout_s)]

    def factory():
        return cls(
            event_hooks=hooks,
            follow_redirects=template.follow_redirects,
            timeout=template.timeout,
            trust_env=template.trust_env,
        )

    _settings["policy"] = policy
    set_client_factory(factory)  # closes the current client: the next request builds one from `factory`
    dc.STREAMING_READ_MAX_RETRIES = dc.STREAMING_OPEN_MAX_RETRIES = policy.stream_read_retries
    for name in (
        "STREAMING_READ_RETRY_INTERVAL",
        "STREAMING_READ_SERVER_UNAVAILABLE_RETRY_INTERVAL",
        "STREAMING_READ_RATE_LIMIT_RETRY_INTERVAL",
        "STREAMING_OPEN_RETRY_INTERVAL",
    ):
        setattr(dc, name, policy.stream_retry_interval_s)
