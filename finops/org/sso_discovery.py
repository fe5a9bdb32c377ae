"""The provider's endpoints from its discovery document (OpenID Connect Discovery 1.0), as the
OIDC_* settings finops.org.sso reads: `manage.py sso_discover ISSUER` prints them."""

from __future__ import annotations

from dataclasses import dataclass

import requests

# Setting -> the discovery document's field.
ENDPOINT_FIELDS = {
    "OIDC_OP_AUTHORIZATION_ENDPOINT": "authorization_endpoint",
    "OIDC_OP_TOKEN_ENDPOINT": "token_endpoint",
    "OIDC_OP_USER_ENDPOINT": "userinfo_endpoint",
    "OIDC_OP_JWKS_ENDPOINT": "jwks_uri",
}


class DiscoveryError(ValueError):
    """The issuer's discovery document is missing, not JSON, or not this issuer's."""


@dataclass(frozen=True)
class ProviderEndpoints:
    issuer: str
    settings: dict[str, str]
    signing_algorithms: list[str]


def provider_endpoints(issuer: str, *, timeout: float = 10) -> ProviderEndpoints:
    issuer = issuer.rstrip("/")
    url = f"{issuer}/.well-known/openid-configuration"
    try:
        answer = requests.get(url, timeout=timeout)
        answer.raise_for_status()
        document = answer.json()
    except (requests.RequestException, ValueError) as error:
        raise DiscoveryError(f"{url}: {error}") from error
    if not isinstance(document, dict):
        raise DiscoveryError(f"{url}: not a JSON object")
    # The spec: the document's issuer is exactly the one asked about (else tokens from another
    # issuer could be accepted).
    if str(document.get("issuer", "")).rstrip("/") != issuer:
        raise DiscoveryError(f"{url}: its issuer is {document.get('issuer')!r}, not {issuer!r}")
    missing = [field for field in ENDPOINT_FIELDS.values() if not document.get(field)]
    if missing:
        raise DiscoveryError(f"{url}: no {', '.join(missing)}")
    algorithms = document.get("id_token_signing_alg_values_supported") or []
    return ProviderEndpoints(
        issuer=issuer,
        settings={name: str(document[field]) for name, field in ENDPOINT_FIELDS.items()},
        signing_algorithms=[str(a) for a in algorithms],
    )
