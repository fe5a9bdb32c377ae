"""Where billing files come from (cloud storage exports), before a parser reads them."""

from __future__ import annotations


class SourceFetchError(Exception):
    """An export could not be fetched; the message names the store, key and reason."""


class SourceAccessError(SourceFetchError):
    """The store refused or could not be reached (credentials, missing bucket or container):
    nothing was fetched, so nothing may be imported."""


class MissingPartError(SourceFetchError):
    """A manifest names a data file that is not in the store."""
