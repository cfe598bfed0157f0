"""The user's say over how the upstream key is sent: which of the document's schemes (PMCP_UPSTREAM_AUTH) and in what
shape (PMCP_UPSTREAM_KEY_FORMAT), checked at start, recorded in a compiled catalog. Example::

    api = choose_auth(catalog.api, "apikey:api_key", "Token token={key}", origin="PMCP_UPSTREAM_AUTH")
    sent_value(api.auth, "abc123xyz")        # 'Token token=abc123xyz', in the header the scheme names

Rules (docs/openapi.md says them for users):
- `bearer`, `basic` or `apikey:NAME` (NAME: the securityScheme's name in the document) picks one of the schemes the
  document declares; a choice the document does not declare is an error naming those it does. A document (or spec)
  that declares no scheme at all takes `bearer` or `basic` as the user says.
- the key format holds `{key}` exactly once, and only printable ASCII (no line break or control character: it may go
  in a header); a bearer token's format has no space (RFC 6750's token has none).
- set at run time, each one replaces what the catalog recorded (`spec compile --auth/--key-format`); a format
  recorded for another scheme than the one chosen at run time is dropped.
Standard library only: the Lambda applies these to a compiled catalog.
"""

from __future__ import annotations

from dataclasses import replace

from progressive_mcp.catalog import Api, Auth
from progressive_mcp.errors import ConfigError

AUTH_ENV = "PMCP_UPSTREAM_AUTH"
KEY_FORMAT_ENV = "PMCP_UPSTREAM_KEY_FORMAT"
UPSTREAM_KEY_ENV = "PMCP_UPSTREAM_KEY"
KEY_PLACE = "{key}"
CHOICES = "bearer, basic or apikey:NAME (NAME: a securityScheme of the document)"


def parse_choice(text: str, origin: str = AUTH_ENV) -> str:
    """`text` as a choice (`bearer`, `basic`, `apikey:NAME`); raises ConfigError for anything else."""
    choice = text.strip()
    kind, colon, name = choice.partition(":")
    if kind.lower() in ("bearer", "basic") and not colon:
        return kind.lower()
    if kind.lower() == "apikey" and name.strip():
        return f"apikey:{name.strip()}"
    raise ConfigError(f"{origin} must be {CHOICES}, not {text!r}")


def check_key_format(key_format: str, origin: str = KEY_FORMAT_ENV) -> str:
    """`key_format` if it can shape a key; raises ConfigError saying why not (the format holds no secret)."""
    if key_format.count(KEY_PLACE) != 1:
        raise ConfigError(
            f"{origin} must hold {KEY_PLACE} exactly once (where the key goes, e.g. 'Token token={KEY_PLACE}'); "
            f"{key_format!r} holds it {key_format.count(KEY_PLACE)} times"
        )
    if not (key_format.isascii() and key_format.isprintable()):
        raise ConfigError(
            f"{origin} may hold only printable ASCII characters (no line break, tab or control character: the value "
            f"may go in an HTTP header), not {key_format!r}"
        )
    return key_format


def choose_auth(
    api: Api, choice: str | None, key_format: str | None, *, origin: str = AUTH_ENV, format_origin: str = KEY_FORMAT_ENV
) -> Api:
    """`api` sending its key the way `choice` and `key_format` say (None: as recorded). Raises ConfigError when the
    document declares no such scheme, or when the format does not fit the scheme."""
    if choice is None and key_format is None:
        return api
    auth = api.auth
    if choice is not None:
        chosen = _find(api, parse_choice(choice, origin), origin)
        if auth is None or chosen.scheme_name != auth.scheme_name or chosen.scheme != auth.scheme:
            chosen = replace(chosen, key_format=None)  # a format recorded for another scheme does not carry over
        auth = replace(chosen, pair_as_basic=False)  # the user's choice is meant as said
    if key_format is not None:
        if auth is None:
            raise ConfigError(
                f"{format_origin} is set, but {api.title} declares no way to send a key: choose one with {AUTH_ENV}"
            )
        check_key_format(key_format, format_origin)
        if auth.scheme == "bearer" and " " in key_format:
            raise ConfigError(
                f"{format_origin}: a bearer token holds no space, so {key_format!r} cannot shape one; the scheme in "
                f"force is bearer ({_label(auth)}): to send another Authorization value, choose an apiKey scheme "
                f"with {AUTH_ENV}=apikey:NAME"
            )
        auth = replace(auth, key_format=key_format)
    return replace(api, auth=auth)


def sent_value(auth: Auth, key: str) -> str:
    """The key as its scheme then sends it: the key format applied (else the prefix put before it)."""
    if auth.key_format is not None:
        return auth.key_format.replace(KEY_PLACE, key)
    return key if auth.scheme != "api_key" else auth.prefix + key


def secret_forms(auth: Auth | None, key: str | None) -> tuple[str, ...]:
    """The key and the value made of it that goes upstream (masked wherever the key is)."""
    if not key:
        return ()
    if auth is None or auth.key_format is None:
        return (key,)
    return (key, sent_value(auth, key))


def _find(api: Api, choice: str, origin: str) -> Auth:
    options = api.auth_options or ((api.auth,) if api.auth is not None else ())
    kind, _, name = choice.partition(":")
    if kind == "apikey":
        found = [o for o in options if o.scheme == "api_key" and name in (o.scheme_name, o.name)]
        found = found or [o for o in options if o.scheme == "api_key" and name.casefold() == _folded(o)]
    else:
        found = [o for o in options if o.scheme == kind]
    if found:
        return found[0]
    if not options and kind in ("bearer", "basic"):  # the document cannot say: the user does
        return Auth("header", "Authorization", UPSTREAM_KEY_ENV, scheme=kind)  # type: ignore[arg-type]
    declared = ", ".join(_label(o) for o in options) or "none"
    offer = ", ".join(dict.fromkeys(_choice_of(o) for o in options))
    raise ConfigError(
        f"{origin}={choice}: {api.title} declares no such security scheme. It declares: {declared}"
        + (f"; choose one of: {offer}" if offer else "; without a scheme, choose bearer or basic")
    )


def _folded(auth: Auth) -> str:
    return (auth.scheme_name or auth.name).casefold()


def _choice_of(auth: Auth) -> str:
    return f"apikey:{auth.scheme_name or auth.name}" if auth.scheme == "api_key" else auth.scheme


def _label(auth: Auth) -> str:
    where = f"{auth.in_} {auth.name}" if auth.scheme == "api_key" else "Authorization header"
    return f"{auth.scheme_name or auth.name} ({auth.scheme.replace('_', ' ')}, {where})"
