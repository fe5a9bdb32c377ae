"""manage.py api_token create|list|revoke: API tokens from the shell (the key is printed once)."""

from __future__ import annotations

from argparse import ArgumentParser
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from finops.tokens.models import ApiToken
from finops.tokens.selectors import api_token_list_for_user
from finops.tokens.services import TokenError, api_token_create, api_token_revoke


class Command(BaseCommand):
    help = "Create, list or revoke per-user API tokens (Authorization: Token <key>)."

    def add_arguments(self, parser: ArgumentParser) -> None:
        sub = parser.add_subparsers(dest="action", required=True)
        create = sub.add_parser("create", help="print a new key (shown only this once)")
        create.add_argument("--user", required=True, help="username")
        create.add_argument("--name", default="", help="what uses it (default: cli)")
        create.add_argument("--read-only", action="store_true", help="GET/HEAD/OPTIONS only")
        create.add_argument(
            "--team", action="append", default=[], help="limit to this team slug (repeatable)"
        )
        create.add_argument("--expires-in-days", type=int, default=None)
        listing = sub.add_parser("list", help="a user's tokens (never their keys)")
        listing.add_argument("--user", required=True)
        revoke = sub.add_parser("revoke", help="revoke a token by id")
        revoke.add_argument("token_id", type=int)

    def handle(self, *args: Any, **options: Any) -> None:
        action = options["action"]
        if action == "revoke":
            try:
                token = api_token_revoke(token_id=options["token_id"])
            except ApiToken.DoesNotExist as exc:
                raise CommandError(f"No token with id {options['token_id']}.") from exc
            self.stdout.write(f"revoked {token.pk} {token.name} ({token.prefix}…)")
            return
        user = self._user(options["user"])
        if action == "list":
            for t in api_token_list_for_user(user=user):
                state = "revoked" if t.revoked_at else "active"
                teams = ",".join(team.slug for team in t.teams.all()) or "*"
                mode = "ro" if t.read_only else "rw"
                expires = t.expires_at.isoformat() if t.expires_at else "never"
                self.stdout.write(
                    f"{t.pk}\t{t.name}\t{t.prefix}…\t{mode}\tteams={teams}\t"
                    f"expires={expires}\t{state}"
                )
            return
        try:
            created = api_token_create(
                user=user,
                name=options["name"] or "cli",
                read_only=options["read_only"],
                team_slugs=options["team"],
                expires_in_days=options["expires_in_days"],
            )
        except TokenError as exc:
            raise CommandError(str(exc)) from exc
        # Only the key on stdout, so `KEY=$(manage.py api_token create ...)` works.
        self.stdout.write(created.key)
        self.stderr.write(f"token {created.token.pk} created; the key is not stored, keep it now")

    def _user(self, username: str) -> Any:
        try:
            return get_user_model().objects.get(username=username)
        except get_user_model().DoesNotExist as exc:
            raise CommandError(f"No user {username!r}.") from exc
