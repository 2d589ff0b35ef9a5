"""What went wrong talking to S3, said as a SourceError naming the URL: never botocore's own text
unchecked, which may quote a request, and never a credential."""

from __future__ import annotations

from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    ConnectionClosedError,
    ConnectTimeoutError,
    EndpointConnectionError,
    NoCredentialsError,
    PartialCredentialsError,
    ProfileNotFound,
    ReadTimeoutError,
    SSLError,
)

from verification.errors import SourceError
from verification.redaction import Redactor

ACCESS_DENIED = {"AccessDenied", "AllAccessDisabled", "InvalidAccessKeyId", "SignatureDoesNotMatch",
                 "InvalidToken", "ExpiredToken", "TokenRefreshRequired", "AccountProblem", "InvalidSecurity",
                 "Forbidden", "403"}
# Why a 403 happened, where the code says more than "denied".
DENIED_BECAUSE = {
    "InvalidAccessKeyId": "the endpoint does not know the access key",
    "SignatureDoesNotMatch": "the secret key does not match the access key",
    "ExpiredToken": "the session token has expired",
    "InvalidToken": "the session token is not valid",
}
MISSING_KEY = {"NoSuchKey", "404", "NotFound"}
WRONG_REGION = {"PermanentRedirect", "AuthorizationHeaderMalformed", "IllegalLocationConstraintException", "301"}


class S3Error(SourceError):
    """An S3 request failed; `code` is S3's error code (or the kind of connection failure)."""

    def __init__(self, message: str, code: str) -> None:
        super().__init__(message)
        self.code = code


def client_error_code(exc: ClientError) -> tuple[str, int | None]:
    error = exc.response.get("Error", {})
    status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    return str(error.get("Code") or status or "unknown"), status


def translate(exc: BaseException, *, url: str, operation: str, endpoint: str, scrub: Redactor,
              attempts: int) -> S3Error:
    """`exc`, raised by `operation` on `url`, as an error a user can act on (exit 2)."""
    if isinstance(exc, ClientError):
        code, status = client_error_code(exc)
        http = f"HTTP {status}" if status else "no HTTP status"
        said = scrub(str(exc.response.get("Error", {}).get("Message") or "")).strip()
        words = f": {said}" if said and said != code else ""
        if code == "NoSuchBucket":
            bucket = url.removeprefix("s3://").split("/", 1)[0]
            return S3Error(f"{url}: the bucket {bucket!r} does not exist at {endpoint} ({operation}: NoSuchBucket, "
                           f"{http})", code)
        if code == "InvalidObjectState":
            # A 403 too, but nothing to do with the keys: the object is archived and not restored.
            storage_class = exc.response.get("Error", {}).get("StorageClass")
            held = f"the archive storage class {storage_class}" if storage_class else "an archive storage class"
            return S3Error(f"{url} is in {held} and is not restored ({operation}: {code}, {http}): it cannot be "
                           "read until it is restored (S3 RestoreObject) and the restore has completed", code)
        if code in ACCESS_DENIED or status == 403:
            because = DENIED_BECAUSE.get(code, "the credentials used are not allowed to do this")
            return S3Error(f"access denied to {url} ({operation}: {code}, {http}): {because}; check the keys "
                           "(s3.access_key_id, AWS_ACCESS_KEY_ID, the profile) and the bucket's policy", code)
        if code in MISSING_KEY or status == 404:
            return S3Error(f"{url} does not exist ({operation}: {code}, {http})", code)
        if code in ("PreconditionFailed", "412") or status == 412:
            return S3Error(f"{url} changed since the source was listed (its ETag is no longer the one listed; "
                           f"{operation}: {code}, {http})", code)
        if code in WRONG_REGION or status == 301:
            return S3Error(f"{url}: the bucket is in another region than the one asked ({operation}: {code}, "
                           f"{http}{words}); set s3.region", code)
        return S3Error(f"{url}: {operation} failed ({code}, {http}{words})", code)
    if isinstance(exc, SSLError):
        reason = scrub(str(exc.kwargs.get("error") or exc))
        return S3Error(f"{url}: the TLS certificate of {endpoint} is not trusted or not valid ({reason}); give "
                       "the CA that signed it in s3.ca_bundle (or AWS_CA_BUNDLE), or s3.verify_tls: false for a "
                       "test endpoint", "SSLError")
    if isinstance(exc, EndpointConnectionError | ConnectTimeoutError | ConnectionClosedError | ReadTimeoutError):
        kind = {EndpointConnectionError: "could not connect", ConnectTimeoutError: "connecting timed out",
                ConnectionClosedError: "the connection was closed", ReadTimeoutError: "no answer in time"}
        said = next((text for cls, text in kind.items() if isinstance(exc, cls)), "connection failed")
        return S3Error(f"{url}: cannot reach the S3 endpoint {endpoint}: {said} ({operation}, {attempts} "
                       "attempts); check s3.endpoint_url (or AWS_ENDPOINT_URL) and the network", type(exc).__name__)
    if isinstance(exc, NoCredentialsError | PartialCredentialsError):
        return S3Error(f"{url}: no S3 credentials found: set s3.access_key_id and s3.secret_access_key, or "
                       "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or a profile (s3.profile, AWS_PROFILE)",
                       type(exc).__name__)
    if isinstance(exc, ProfileNotFound):
        return S3Error(f"{url}: the AWS profile {exc.kwargs.get('profile')!r} is not configured (s3.profile or "
                       "AWS_PROFILE; ~/.aws/config)", "ProfileNotFound")
    if isinstance(exc, BotoCoreError):
        return S3Error(f"{url}: {operation} failed: {type(exc).__name__}: {scrub(str(exc))}", type(exc).__name__)
    return S3Error(f"{url}: {operation} failed: {type(exc).__name__}: {scrub(str(exc))}", type(exc).__name__)
