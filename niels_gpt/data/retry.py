"""The project's retry policy for hub reads: which errors are transient, how long to wait, when to stop.

Where the retries of one hub read live, innermost first (README "Network faults and resuming"):
- huggingface_hub's `http_backoff` (6 tries, 1-8 s apart, Retry-After honoured uncapped): the tree
  listing, the README HEAD's second round, each range read of a streamed file; 408/429/5xx, timeouts,
  resets. It never retries the revision-info call, the README GET or a non-streamed file GET's 5xx/reset.
- datasets' streaming retries: a streamed read still failing on 504/429 or a network error is retried
  `stream_read_retries` times, `stream_retry_interval_s` apart (`bound_library_retries` sets datasets'
  constants: its own 20 rounds of 5-60 s could wait ~14 min on one read).
- ours, `call(fn, policy)`: `hub.open_dataset` retries `load_dataset` (the metadata calls, the downloads of a
  prepared dataset), and `resumable.ShuffledStream` re-opens a streamed file at the row it had reached.
  Up to `attempts` tries, waits backoff_s * 2**k (at most max_backoff_s; a 429's Retry-After instead, up to
  retry_after_cap_s), never more than max_wait_s of waiting in all; then `RetriesExhausted`.
- `install_request_timeout`: a hub request sent without a timeout (the tree listing) gets
  `request_timeout_s` as its read timeout, so a stall fails and is retried instead of hanging forever.

Transient (`is_transient`, along the error's cause chain): HfHubHTTPError 408/429/5xx except its
not-found / gated / disabled / bad-request subclasses, httpx TransportError, ConnectionError and
TimeoutError (not offline mode), the FileNotFoundError datasets raises when the README HEAD's retries
ran out (unless a 401/403 caused it), "Consistency check failed" (a truncated download). Never:
DatasetNotFoundError, a bad config or split (ValueError), pyarrow's ArrowInvalid.
"""

from __future__ import annotations

import email.utils
import time
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any, TypeVar

from niels_gpt.log import log

T = TypeVar("T")

TRANSIENT_STATUS = (408, 429, 500, 502, 503, 504)  # huggingface_hub's own retry list (utils/_http.py)
DENIED_STATUS = (401, 403)  # a token or access problem: waiting does not fix it
# datasets' message when the README HEAD's retry round ran out (load.py rewraps LocalEntryNotFoundError)
README_EXHAUSTED = "An error happened while trying to locate the file on the Hub"
CONSISTENCY = "Consistency check failed"  # huggingface_hub: a download shorter than its announced size
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
    """A transient hub error that outlasted the policy: `what`, `tries`, `waited_s`, the last error."""

    def __init__(self, what: str, tries: int, waited_s: float, last: BaseException):
        self.what, self.tries, self.waited_s, self.last = what, tries, waited_s, last
        super().__init__(
            f"{what}: the hub still failed after {tries} tries and {waited_s:.0f} s of waiting "
            f"(last error: {type(last).__name__}: {short(last)})"
        )


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
        headers = getattr(getattr(e, "response", None), "headers", None)
        value = headers.get("Retry-After") if headers is not None else None
        if value is None:
            continue
        try:
            return float(value)
        except ValueError:
            when = email.utils.parsedate_to_datetime(value) if value else None
            return max(0.0, when.timestamp() - time.time()) if when else None
    return None


def _permanent_types() -> tuple[type[BaseException], ...]:
    from datasets.exceptions import DataFilesNotFoundError, DatasetNotFoundError
    from huggingface_hub import errors

    return (
        DatasetNotFoundError,
        DataFilesNotFoundError,
        errors.OfflineModeIsEnabled,
        errors.RepositoryNotFoundError,  # GatedRepoError too
        errors.RevisionNotFoundError,
        errors.RemoteEntryNotFoundError,
        errors.BadRequestError,
        errors.DisabledRepoError,
        RetriesExhausted,
    )


def _denied(exc: BaseException) -> bool:
    return any(status_of(e) in DENIED_STATUS for e in cause_chain(exc))


def is_transient(exc: BaseException) -> bool:
    """True if waiting and trying again may help (see the module docstring); False for anything else."""
    from huggingface_hub import constants
    from huggingface_hub.errors import HfHubHTTPError
    from huggingface_hub.utils import httpx

    if constants.HF_HUB_OFFLINE:  # datasets re-raises offline mode as a bare ConnectionError (`raise e1 from None`)
        return False
    permanent = _permanent_types()
    for e in cause_chain(exc):
        if isinstance(e, permanent):
            return False
        if isinstance(e, HfHubHTTPError):
            return status_of(e) in TRANSIENT_STATUS
        if isinstance(e, httpx.TransportError) or isinstance(e, (ConnectionError, TimeoutError)):
            return True
        if isinstance(e, FileNotFoundError) and README_EXHAUSTED in str(e):
            return not _denied(e)
        if isinstance(e, OSError) and str(e).startswith(CONSISTENCY):
            return True
    return False


def call(
    fn: Callable[[], T],
    *,
    what: str,
    policy: RetryPolicy,
    transient: Callable[[BaseException], bool] = is_transient,
    on_retry: Callable[[str], None] = log,
    failure: Callable[[BaseException], str] | None = None,
) -> T:
    """`fn()`, tried again after a transient error (`transient`) by `policy`; a permanent error is raised
    as it is, and the last transient one, once the tries or the wait run out, as RetriesExhausted.
    Each retry is announced to `on_retry` as "{what}: {failure(error)}; try k of n in s s" (default
    failure: the error's type and first line)."""
    waited = 0.0
    for attempt in range(1, policy.attempts + 1):
        try:
            return fn()
        except Exception as e:
            if not transient(e):
                raise
            pause = policy.wait(attempt, e)
            if attempt == policy.attempts or waited + pause > policy.max_wait_s:
                raise RetriesExhausted(what, attempt, waited, e) from e
            reason = failure(e) if failure is not None else f"{type(e).__name__}: {short(e, 120)}"
            on_retry(f"{what}: {reason}; try {attempt + 1} of {policy.attempts} in {pause:g} s")
            time.sleep(pause)
            waited += pause
    raise AssertionError("unreachable: attempts >= 1")


def bound_library_retries(policy: RetryPolicy) -> None:
    """Bound datasets' own streaming retries (module constants it reads at call time) by `policy`."""
    import datasets.config as dc

    dc.STREAMING_READ_MAX_RETRIES = policy.stream_read_retries
    dc.STREAMING_OPEN_MAX_RETRIES = policy.stream_read_retries
    for name in (
        "STREAMING_READ_RETRY_INTERVAL",
        "STREAMING_READ_SERVER_UNAVAILABLE_RETRY_INTERVAL",
        "STREAMING_READ_RATE_LIMIT_RETRY_INTERVAL",
        "STREAMING_OPEN_RETRY_INTERVAL",
    ):
        setattr(dc, name, policy.stream_retry_interval_s)


_installed_timeout: list[float] = []  # the request timeout of the client factory installed, if any


def _default_read_timeout(seconds: float) -> Callable[[Any], None]:
    def hook(request) -> None:
        timeout = dict(request.extensions.get("timeout") or {})
        if timeout.get("read") is None:
            timeout.update({k: seconds for k in ("connect", "read", "write", "pool") if timeout.get(k) is None})
            request.extensions["timeout"] = timeout

    return hook


def install_request_timeout(seconds: float) -> None:
    """Make huggingface_hub's HTTP client give every request sent without a read timeout (the tree
    listing, paths-info) `seconds` of one: an httpx request event hook, installed once per value."""
    if _installed_timeout == [seconds]:
        return
    from huggingface_hub.utils import set_client_factory
    from huggingface_hub.utils._http import default_client_factory

    def factory():
        client = default_client_factory()
        client.event_hooks["request"] = [*client.event_hooks["request"], _default_read_timeout(seconds)]
        return client

    set_client_factory(factory)  # closes the current client: the next request builds one from `factory`
    _installed_timeout[:] = [seconds]


def prepare(policy: RetryPolicy) -> None:
    """Apply the parts of `policy` that live in the libraries: datasets' retry bounds, the request timeout."""
    bound_library_retries(policy)
    install_request_timeout(policy.request_timeout_s)
