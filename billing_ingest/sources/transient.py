"""Which fetch errors a later attempt may get past, for callers that retry (scheduled fetches).

The source modules turn every SDK error into SourceFetchError / SourceAccessError with a message
naming the store, keeping the SDK's exception as the cause or context. That original decides:
a connection refused or reset, a timeout, throttling and server-side (5xx) errors pass with
time; a refusal (credentials, permissions, TLS verification), a missing bucket, an unknown
export or a malformed file do not, and retrying them only repeats the failure.
"""

from __future__ import annotations

from collections.abc import Iterator

# Error codes of AWS APIs (S3 and JSON protocols) that mean "try again later".
_AWS_TRANSIENT_CODES = frozenset(
    {
        "InternalError",
        "InternalFailure",
        "InternalServerException",
        "RequestLimitExceeded",
        "RequestTimeout",
        "RequestTimeoutException",
        "ServiceUnavailable",
        "ServiceUnavailableException",
        "SlowDown",
        "Throttling",
        "ThrottlingException",
        "TooManyRequestsException",
    }
)
_TOO_MANY_REQUESTS = 429


def _retryable_status(status: object) -> bool:
    return isinstance(status, int) and (status == _TOO_MANY_REQUESTS or status >= 500)


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """The exception, then its cause or context, and theirs (``raise ... from None`` keeps the
    original as context)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def _aws_transient(exc: BaseException) -> bool | None:
    from botocore import exceptions as boto

    if isinstance(exc, boto.SSLError):
        return False  # a certificate that does not verify will not verify later either
    if isinstance(exc, boto.ConnectionError | boto.HTTPClientError):
        return True
    if isinstance(exc, boto.ClientError):
        error = exc.response.get("Error", {})
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        return error.get("Code") in _AWS_TRANSIENT_CODES or _retryable_status(status)
    return None


def _azure_transient(exc: BaseException) -> bool | None:
    from azure.core import exceptions as azure

    if isinstance(exc, azure.ServiceRequestError | azure.ServiceResponseError):
        return True
    if isinstance(exc, azure.HttpResponseError):
        return _retryable_status(exc.status_code)
    return None


def _google_transient(exc: BaseException) -> bool | None:
    from google.api_core import exceptions as google_api
    from google.auth import exceptions as google_auth

    if isinstance(exc, google_auth.TransportError):
        return True
    if isinstance(exc, google_api.GoogleAPICallError):
        return _retryable_status(exc.code)
    return None


def source_error_transient(exc: BaseException) -> bool:
    """Whether a fetch that failed with ``exc`` may succeed if tried again later."""
    for link in _chain(exc):
        for check in (_aws_transient, _azure_transient, _google_transient):
            verdict = check(link)
            if verdict is not None:
                return verdict
        if isinstance(link, ConnectionError | TimeoutError):
            return True
    return False
