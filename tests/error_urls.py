"""URLconf for tests/web/test_error_pages.py: the site's URLs plus a view that fails."""

from typing import NoReturn

from django.http import HttpRequest
from django.urls import path

from finops.urls import handler400, handler403, handler404, handler500, urlpatterns


def boom(request: HttpRequest) -> NoReturn:
    raise RuntimeError("boom")


urlpatterns = [*urlpatterns, path("boom/", boom)]
__all__ = ["handler400", "handler403", "handler404", "handler500", "urlpatterns"]
