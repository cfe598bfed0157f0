"""The HTTP endpoint as an OAuth 2.1 protected resource: settings checks, the issuer's keys, access-token validation.

The MCP authorization specification (2025-06-18, 2025-11-25) makes an MCP server a resource server: it
publishes Protected Resource Metadata (RFC 9728) naming its authorization server, challenges with
`WWW-Authenticate: Bearer resource_metadata="..."`, and accepts only tokens issued for it (RFC 8707's
`resource`, the JWT's `aud`). This module checks JWT access tokens against the issuer's JWKS, found through the
issuer's metadata and cached. The JOSE library (PyJWT with `cryptography`) is imported on the first validation,
so the passthrough and server-key cold starts never pay for it. Example::

    validator = TokenValidator("https://issuer.example", required_scopes=("mcp",))
    identity = validator.validate(token, audience="https://mcp.example/mcp")   # or raises TokenRejected
    identity.caller                                                            # 'oauth:3f2a…' (a digest)
"""

from __future__ import annotations

import importlib.util
import ipaddress
import json
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from progressive_mcp.calls.fairness import caller_id
from progressive_mcp.errors import ConfigError, ProgressiveMCPError

logger = logging.getLogger(__name__)

# Asymmetric algorithms only: never `none`, never an HMAC (whose "secret" could be the issuer's public key).
ALLOWED_ALGORITHMS = frozenset(
    {"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}
)
# Clock skew tolerated on exp, nbf and iat (RFC 9068 leaves it to the resource; a minute is the usual choice).
LEEWAY_S = 60
# An unknown `kid` refetches the JWKS at once (the issuer may have rotated its keys), then at most once per this
# interval, so tokens with made-up kids cannot make this server hammer the issuer.
JWKS_REFETCH_INTERVAL_S = 60.0
# Keys are refetched this long after the last fetch even without an unknown kid, so a key the issuer withdrew
# stops being accepted.
JWKS_MAX_AGE_S = 3600.0
# After a failed fetch of the issuer's metadata or keys, callers get 503 for this long before the next attempt.
FETCH_RETRY_S = 5.0
FETCH_TIMEOUT_S = 5.0
MAX_DOCUMENT_BYTES = 512 * 1024  # an issuer's metadata or JWKS; real ones are a few KiB
# RFC 6749's scope-token characters: printable ASCII without space, `"` and `\` (they go into a header value).
_SCOPE_CHARS = frozenset(chr(c) for c in range(0x21, 0x7F)) - {'"', "\\"}

Fetch = Callable[[str], bytes]  # GET a URL, the body; raises OSError when it cannot


class AccessDenied(ProgressiveMCPError):
    """A request's access token does not let it in; `description` is safe to show (it holds nothing of the token)."""

    def __init__(self, description: str) -> None:
        super().__init__(description)
        self.description = description


class TokenRejected(AccessDenied):
    """The token is not a valid access token of the configured issuer for this resource (HTTP 401)."""


class InsufficientScope(AccessDenied):
    """A valid token that lacks scopes this resource requires (HTTP 403, for step-up authorization)."""


class IssuerUnavailable(ProgressiveMCPError):
    """The issuer's metadata or keys could not be read, so no token can be checked just now (HTTP 503)."""


@dataclass(frozen=True)
class Identity:
    """Who a valid token speaks for. `caller` is a digest of issuer and subject: what logs and shares use."""

    caller: str
    scopes: frozenset[str]
    # What per-identity policies match (progressive_mcp.policies): the token's subject and its groups claim.
    subject: str = ""
    groups: frozenset[str] = frozenset()


# --- settings --------------------------------------------------------------------------------------------------


def is_loopback_host(host: str) -> bool:
    """Whether a URL's host names this machine's loopback interface (`localhost`, 127.0.0.0/8, ::1)."""
    host = host.strip("[]").lower()
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_issuer(issuer: str) -> None:
    """An issuer identifier is an https URL without query or fragment (RFC 8414 §2); http only on loopback."""
    parts = urlsplit(issuer)
    if parts.scheme == "http" and parts.hostname and is_loopback_host(parts.hostname):
        pass
    elif parts.scheme != "https" or not parts.hostname:
        raise ConfigError(
            f"PMCP_OAUTH_ISSUER must be an https URL (http only on a loopback host, for tests), not {issuer[:200]!r}"
        )
    if parts.query or parts.fragment or "#" in issuer:
        raise ConfigError(f"PMCP_OAUTH_ISSUER must have no query or fragment (RFC 8414), not {issuer[:200]!r}")


def check_audience(audience: str) -> None:
    """The resource's identifier: an absolute http(s) URL without a fragment (RFC 8707 §2)."""
    parts = urlsplit(audience)
    if parts.scheme not in ("https", "http") or not parts.hostname or "#" in audience:
        raise ConfigError(
            f"PMCP_OAUTH_AUDIENCE must be the endpoint's absolute URL without a fragment (e.g. "
            f"https://mcp.example.com/mcp), not {audience[:200]!r}"
        )
    if parts.scheme == "http" and not is_loopback_host(parts.hostname):
        raise ConfigError(f"PMCP_OAUTH_AUDIENCE must be an https URL (http only on loopback), not {audience[:200]!r}")


def check_scopes(scopes: Sequence[str]) -> None:
    for scope in scopes:
        if not scope or set(scope) - _SCOPE_CHARS:
            raise ConfigError(
                f"PMCP_OAUTH_SCOPES: {scope[:60]!r} is not a scope (printable ASCII without spaces, quotes or "
                "backslashes; separate scopes with commas)"
            )


# --- the issuer's keys -----------------------------------------------------------------------------------------


def http_fetch(url: str) -> bytes:
    """GET `url` without following redirects, at most MAX_DOCUMENT_BYTES, within FETCH_TIMEOUT_S."""
    import httpx

    try:
        with (
            httpx.Client(timeout=FETCH_TIMEOUT_S, follow_redirects=False) as client,
            client.stream("GET", url, headers={"Accept": "application/json"}) as response,
        ):
            if response.status_code != 200:
                raise OSError(f"HTTP {response.status_code} from {url}")
            body = bytearray()
            for chunk in response.iter_bytes():
                body += chunk
                if len(body) > MAX_DOCUMENT_BYTES:
                    raise OSError(f"{url} answered more than {MAX_DOCUMENT_BYTES} bytes")
            return bytes(body)
    except httpx.HTTPError as exc:
        raise OSError(f"{type(exc).__name__} reading {url}") from None


def metadata_urls(issuer: str) -> list[str]:
    """Where an issuer's metadata may be (RFC 8414 §3 with path insertion, then OpenID Connect Discovery)."""
    parts = urlsplit(issuer)
    origin, path = f"{parts.scheme}://{parts.netloc}", parts.path.rstrip("/")
    if not path:
        return [f"{origin}/.well-known/oauth-authorization-server", f"{origin}/.well-known/openid-configuration"]
    return [
        f"{origin}/.well-known/oauth-authorization-server{path}",
        f"{origin}/.well-known/openid-configuration{path}",
        f"{origin}{path}/.well-known/openid-configuration",
    ]


class IssuerKeys:
    """The issuer's signing keys by `kid`, from the JWKS its metadata names: fetched on first use, refetched on an
    unknown kid (at most once per JWKS_REFETCH_INTERVAL_S) and when older than JWKS_MAX_AGE_S. Thread-safe."""

    def __init__(
        self,
        issuer: str,
        *,
        fetch: Fetch = http_fetch,
        clock: Callable[[], float] = time.monotonic,
        refetch_interval_s: float = JWKS_REFETCH_INTERVAL_S,
        max_age_s: float = JWKS_MAX_AGE_S,
    ) -> None:
        self.issuer = issuer
        self._fetch = fetch
        self._clock = clock
        self._refetch_interval_s = refetch_interval_s
        self._max_age_s = max_age_s
        self._lock = threading.Lock()
        self._jwks_uri: str | None = None
        self._keys: list[dict[str, Any]] | None = None
        self._fetched_at = float("-inf")
        self._unknown_kid_fetch_at = float("-inf")
        self._retry_at = float("-inf")

    def find(self, kid: str | None) -> dict[str, Any] | None:
        """The JWK with this kid (a JWKS of one key serves a token without a kid), or None after one refetch."""
        with self._lock:
            now = self._clock()
            if self._keys is None or now - self._fetched_at >= self._max_age_s:
                self._load(now, keep_old=self._keys is not None)
            key = self._pick(kid)
            if key is None and now - self._unknown_kid_fetch_at >= self._refetch_interval_s:
                self._unknown_kid_fetch_at = now
                self._load(now, keep_old=True)  # a rotation this server has not seen yet
                key = self._pick(kid)
            return key

    def _pick(self, kid: str | None) -> dict[str, Any] | None:
        keys = [k for k in self._keys or () if k.get("use", "sig") == "sig"]
        if kid is None:
            return keys[0] if len(keys) == 1 else None
        return next((k for k in keys if k.get("kid") == kid), None)

    def _load(self, now: float, *, keep_old: bool) -> None:
        if now < self._retry_at:
            if keep_old:
                return
            raise IssuerUnavailable("the issuer's keys could not be read a moment ago")
        try:
            if self._jwks_uri is None:
                self._jwks_uri = self._discover()
            keys = json.loads(self._fetch(self._jwks_uri)).get("keys")
            if not isinstance(keys, list):
                raise ValueError("the JWKS has no keys array")
        except (OSError, ValueError, AttributeError, IssuerUnavailable) as exc:
            self._retry_at = now + FETCH_RETRY_S
            logger.warning("could not read the OAuth issuer's keys: %s", _brief(exc))
            if keep_old:
                return  # the keys we have stay in use until the issuer answers again
            raise IssuerUnavailable("the issuer's keys could not be read") from None
        self._keys = [k for k in keys if isinstance(k, dict)]
        self._fetched_at = now
        logger.info("read %d signing keys of the OAuth issuer", len(self._keys))

    def _discover(self) -> str:
        """The issuer's jwks_uri, from the first metadata document found that names this very issuer."""
        for url in metadata_urls(self.issuer):
            try:
                metadata = json.loads(self._fetch(url))
            except (OSError, ValueError) as exc:
                logger.info("no issuer metadata at %s: %s", url, _brief(exc))
                continue
            if not isinstance(metadata, dict) or metadata.get("issuer") != self.issuer:
                # RFC 8414 §3.3: metadata naming another issuer is not this issuer's (a mix-up defence).
                logger.warning("the metadata at %s names another issuer; ignored", url)
                continue
            jwks_uri = metadata.get("jwks_uri")
            if not isinstance(jwks_uri, str) or not _fetchable(jwks_uri):
                raise ValueError(f"the metadata at {url} names no usable jwks_uri (https, or http on loopback)")
            return jwks_uri
        raise IssuerUnavailable(f"no metadata of {self.issuer} at {', '.join(metadata_urls(self.issuer))}")


def _fetchable(url: str) -> bool:
    parts = urlsplit(url)
    return parts.scheme == "https" or (parts.scheme == "http" and is_loopback_host(parts.hostname or ""))


def _brief(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {str(exc)[:200]}"


# --- tokens ----------------------------------------------------------------------------------------------------


class TokenValidator:
    """Checks JWT access tokens: signature by an issuer key, alg, iss, aud, exp/nbf/iat, and the required scopes."""

    def __init__(
        self,
        issuer: str,
        *,
        required_scopes: Sequence[str] = (),
        keys: IssuerKeys | None = None,
        leeway_s: int = LEEWAY_S,
    ) -> None:
        for module in ("jwt", "cryptography"):  # found now, imported at the first token
            if importlib.util.find_spec(module) is None:
                raise ConfigError(
                    f"oauth auth mode needs PyJWT with cryptography ({module} is missing): pip install "
                    "'progressive-mcp[oauth]' (the stack's Lambda asset adds it with -c auth_mode=oauth)"
                )
        self.issuer = issuer
        self.required_scopes = tuple(required_scopes)
        self.groups_claim = "groups"  # the claim listing the subject's groups (policies may name another)
        self.keys = keys or IssuerKeys(issuer)
        self.leeway_s = leeway_s

    def validate(self, token: str, *, audience: str) -> Identity:
        """The identity `token` speaks for at the resource `audience`; raises TokenRejected or InsufficientScope
        (or IssuerUnavailable). Error descriptions never hold any part of the token."""
        import jwt  # PyJWT: imported here so the other auth modes' cold starts never load it (nor cryptography)

        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            raise TokenRejected("the access token is not a JWT") from None
        alg = header.get("alg")
        if alg not in ALLOWED_ALGORITHMS:
            raise TokenRejected("the access token's signing algorithm is not accepted here")
        kid = header.get("kid")
        if kid is not None and not isinstance(kid, str):
            raise TokenRejected("the access token's key id is not a string")
        jwk = self.keys.find(kid)
        if jwk is None:
            raise TokenRejected("the access token is signed by a key the issuer does not publish")
        if jwk.get("alg") not in (None, alg):
            raise TokenRejected("the access token's algorithm is not its key's")
        try:
            key = jwt.PyJWK(jwk, algorithm=alg)
        except jwt.PyJWTError:
            raise TokenRejected("the access token's algorithm does not fit the issuer's key") from None
        try:
            claims = jwt.decode(
                token,
                key,
                algorithms=[alg],
                audience=_audiences(audience),
                issuer=self.issuer,
                leeway=self.leeway_s,
                options={"require": ["exp", "iss", "aud"]},
            )
        except jwt.ExpiredSignatureError:
            raise TokenRejected("the access token has expired") from None
        except jwt.ImmatureSignatureError:
            raise TokenRejected("the access token is not valid yet") from None
        except jwt.InvalidAudienceError:
            raise TokenRejected("the access token was issued for another resource") from None
        except jwt.InvalidIssuerError:
            raise TokenRejected("the access token comes from another issuer") from None
        except jwt.MissingRequiredClaimError as exc:
            raise TokenRejected(f"the access token has no {exc.claim!r} claim") from None
        except jwt.InvalidSignatureError:
            raise TokenRejected("the access token's signature is not valid") from None
        except jwt.PyJWTError:
            raise TokenRejected("the access token is not valid") from None
        scopes = token_scopes(claims)
        missing = [s for s in self.required_scopes if s not in scopes]
        if missing:
            raise InsufficientScope(f"the access token lacks the scope {' '.join(missing)}")
        subject = claims.get("sub") or claims.get("client_id") or ""
        groups = token_scopes({"scope": claims.get(self.groups_claim)})  # a list, or a space-separated string
        return Identity(
            caller=caller_id("oauth", f"{self.issuer}\0{subject}"),
            scopes=scopes,
            subject=subject if isinstance(subject, str) else "",
            groups=groups,
        )


def _audiences(resource: str) -> list[str]:
    """The resource URL, with and without a trailing slash (RFC 8707 leaves that to the client)."""
    bare = resource.rstrip("/")
    return [bare, f"{bare}/"]


def token_scopes(claims: Mapping[str, Any]) -> frozenset[str]:
    """The scopes a token grants: RFC 9068's space-separated `scope`, or the `scp` some issuers use."""
    scope = claims.get("scope", claims.get("scp"))
    if isinstance(scope, str):
        return frozenset(scope.split())
    if isinstance(scope, list):
        return frozenset(s for s in scope if isinstance(s, str))
    return frozenset()
