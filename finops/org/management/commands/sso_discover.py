"""Print the OIDC_* environment lines for a provider, read from its discovery document."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from finops.org.sso_discovery import DiscoveryError, provider_endpoints


class Command(BaseCommand):
    help = (
        "Print the OIDC_OP_* settings of an OpenID Connect provider from ISSUER's "
        "/.well-known/openid-configuration (add OIDC_RP_CLIENT_ID and OIDC_RP_CLIENT_SECRET)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "issuer", help="the provider's issuer URL, e.g. https://login.example.com"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            found = provider_endpoints(options["issuer"])
        except DiscoveryError as error:
            raise CommandError(str(error)) from error
        for name, value in found.settings.items():
            self.stdout.write(f"{name}={value}")
        if found.signing_algorithms and "RS256" not in found.signing_algorithms:
            algorithm = found.signing_algorithms[0]
            self.stdout.write(f"OIDC_RP_SIGN_ALGO={algorithm}")
        self.stdout.write(f"# redirect URI to register: <site>/oidc/callback/ ({found.issuer})")
