"""The API router: DRF's DefaultRouter whose root (/api/v1/) also lists the plain APIViews."""

from __future__ import annotations

from typing import Any

from rest_framework.routers import DefaultRouter


class ApiRouter(DefaultRouter):
    """A root that lists every endpoint: the viewsets registered as usual, and the APIViews
    outside the router (costs, endpoints, reconciliation, ...) named with `add_root_entry`."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.root_entries: dict[str, str] = {}

    def add_root_entry(self, prefix: str, url_name: str) -> None:
        """List `prefix` on the root as a link to the URL named `url_name`; a prefix listed
        twice is a mistake in urls.py (ValueError), not a silent overwrite."""
        if prefix in self.root_entries:
            raise ValueError(f"API root entry {prefix!r} is listed twice")
        self.root_entries[prefix] = url_name

    def get_api_root_view(self, api_urls: Any = None) -> Any:
        list_name = self.routes[0].name
        entries = {
            prefix: list_name.format(basename=basename) for prefix, _, basename in self.registry
        }
        entries.update(self.root_entries)
        # Alphabetical, so a reader (and a dashboard builder) finds an endpoint at a glance.
        return self.APIRootView.as_view(api_root_dict=dict(sorted(entries.items())))
