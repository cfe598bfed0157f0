"""A tiny OAuth issuer on 127.0.0.1 for tests: its metadata and a JWKS of keys made with `cryptography`, and a
way to mint (or forge) access tokens. It counts the requests for its keys, so a test can see refetches."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from jwt.algorithms import ECAlgorithm, RSAAlgorithm


@dataclass
class SigningKey:
    kid: str
    alg: str
    private: Any

    def public_jwk(self) -> dict[str, Any]:
        algorithm = RSAAlgorithm if self.alg.startswith(("RS", "PS")) else ECAlgorithm
        jwk = json.loads(algorithm.to_jwk(self.private.public_key()))
        return {**jwk, "kid": self.kid, "alg": self.alg, "use": "sig"}

    def public_pem(self) -> bytes:
        return self.private.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )


def rsa_key(kid: str, alg: str = "RS256") -> SigningKey:
    return SigningKey(kid, alg, rsa.generate_private_key(public_exponent=65537, key_size=2048))


def ec_key(kid: str) -> SigningKey:
    return SigningKey(kid, "ES256", ec.generate_private_key(ec.SECP256R1()))


@dataclass
class LoopbackIssuer:
    port: int = 0
    keys: list[SigningKey] = field(default_factory=list)  # published in the JWKS
    jwks_requests: int = 0
    metadata_path: str = "/.well-known/oauth-authorization-server"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def claims(self, audience: str, **overrides: Any) -> dict[str, Any]:
        now = int(time.time())
        claims = {
            "iss": self.url,
            "sub": "user-1",
            "aud": audience,
            "iat": now,
            "exp": now + 300,
            "scope": "mcp:tools",
            "client_id": "test-client",
        }
        claims.update(overrides)
        return {k: v for k, v in claims.items() if v is not None}

    def mint(self, audience: str, *, key: SigningKey | None = None, headers: Any = None, **claims: Any) -> str:
        key = key or self.keys[0]
        header = {"kid": key.kid, "typ": "at+jwt", **(headers or {})}
        return jwt.encode(self.claims(audience, **claims), key.private, algorithm=key.alg, headers=header)


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unsigned(header: dict[str, Any], claims: dict[str, Any], signature: bytes = b"") -> str:
    """A JWT assembled by hand: `alg: none`, or any signature a library would refuse to make."""
    head = b64url(json.dumps(header).encode())
    body = b64url(json.dumps(claims).encode())
    return f"{head}.{body}.{b64url(signature)}"


def hmac_with_public_key(key: SigningKey, claims: dict[str, Any]) -> str:
    """HS256 with the issuer's public key (its PEM, as a confused verifier would read it) as the shared secret."""
    head = b64url(json.dumps({"alg": "HS256", "typ": "JWT", "kid": key.kid}).encode())
    body = b64url(json.dumps(claims).encode())
    signature = hmac.new(key.public_pem(), f"{head}.{body}".encode(), hashlib.sha256).digest()
    return f"{head}.{body}.{b64url(signature)}"


@contextmanager
def loopback_issuer(
    *keys: SigningKey, metadata_path: str = "/.well-known/oauth-authorization-server"
) -> Iterator[LoopbackIssuer]:
    """The issuer on a free port, serving its metadata at `metadata_path` and its keys at /jwks."""
    issuer = LoopbackIssuer(keys=list(keys) or [rsa_key("key-1")], metadata_path=metadata_path)

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path == issuer.metadata_path:
                body = {"issuer": issuer.url, "jwks_uri": f"{issuer.url}/jwks", "token_endpoint": f"{issuer.url}/t"}
            elif self.path == "/jwks":
                issuer.jwks_requests += 1
                body = {"keys": [k.public_jwk() for k in issuer.keys]}
            else:
                self.send_error(404)
                return
            data = json.dumps(body).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    issuer.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield issuer
    finally:
        server.shutdown()
        server.server_close()
