"""The SECRET_KEY: from the environment, else generated once and kept in the data folder.

The key signs sessions, CSRF tokens and password-reset links; a public default would let
anyone forge them, so there is none. Without DJANGO_SECRET_KEY, the first process to start
writes a random key to <data folder>/secret_key (mode 0600) and every later process (web,
workers, commands on the same data folder) reads the same one. Deployments on several hosts
set DJANGO_SECRET_KEY (or share the data folder). A key found to be the old public default,
or too short to be secret, is refused at start.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import tempfile
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

KEY_FILE = "secret_key"
# The constant earlier versions fell back to: public, so refused wherever it comes from.
PUBLIC_DEFAULT = "insecure-embedded-default-change-me"
MIN_LENGTH = 50


def _checked(key: str, where: str) -> str:
    if key == PUBLIC_DEFAULT or key.startswith("django-insecure-") or len(key) < MIN_LENGTH:
        raise ImproperlyConfigured(
            f"The SECRET_KEY from {where} is public or shorter than {MIN_LENGTH} characters. "
            "Set DJANGO_SECRET_KEY to a long random value (python -c 'import secrets; "
            "print(secrets.token_urlsafe(64))'), or unset it to have one generated."
        )
    return key


def _write_once(path: Path) -> None:
    """Write a new random key to path unless it exists; atomic, so concurrent first starts
    agree on one key (the losers of the race read the winner's)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temp = tempfile.mkstemp(dir=path.parent, prefix=".secret_key.")  # mode 0600
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(secrets.token_urlsafe(64))
            handle.flush()
            os.fsync(handle.fileno())
        # Fails if another process won the race: theirs is kept, and read by everyone.
        with contextlib.suppress(FileExistsError):
            os.link(temp, path)
    finally:
        os.unlink(temp)


def secret_key_load(*, env_value: str, data_dir: Path) -> str:
    if env_value:
        return _checked(env_value, "DJANGO_SECRET_KEY")
    path = data_dir / KEY_FILE
    try:
        if not path.exists():
            _write_once(path)
        key = path.read_text().strip()
    except OSError as exc:
        raise ImproperlyConfigured(
            f"No DJANGO_SECRET_KEY and the key file {path} cannot be kept: {exc}"
        ) from exc
    return _checked(key, str(path))
