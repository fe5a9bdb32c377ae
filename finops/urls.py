from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.templatetags.static import static
from django.urls import include, path
from django.views.generic import RedirectView

from finops.metrics.views import MetricsView
from finops.web.login import InviteAcceptView, LoginView

urlpatterns = [
    # Our pages link static/favicon.svg; the admin's and the API's pages do not, and a browser
    # then asks for /favicon.ico (a 404 in its console): send it to the same icon.
    path("favicon.ico", RedirectView.as_view(url=static("favicon.svg"), permanent=True)),
    path("admin/", admin.site.urls),
    path("accounts/login/", LoginView.as_view(), name="login"),
    # Single sign-on: /oidc/authenticate/ sends the browser to the provider, which returns it
    # to /oidc/callback/ (finops.org.sso).
    path("oidc/", include("mozilla_django_oidc.urls")),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    # An invitation's link (finops.onboarding.services): choose a password, once.
    path("accounts/invite/<uidb64>/<token>/", InviteAcceptView.as_view(), name="invite-accept"),
    path("account/tokens/", include("finops.web.tokens_urls")),
    path("account/notifications/", include("finops.web.notifications_urls")),
    path("api/", include("finops.api.urls")),
    # Prometheus scrapes /metrics (no slash), with an API token.
    path("metrics", MetricsView.as_view(), name="metrics"),
    path("budgets/", include("finops.web.budgets_urls")),
    path("channels/", include("finops.web.channels_urls")),
    path("", include("finops.web.urls")),
]

# Error pages in the site's layout (used when DEBUG is off).
handler400 = "finops.web.errors.bad_request"
handler403 = "finops.web.errors.permission_denied"
handler404 = "finops.web.errors.page_not_found"
handler500 = "finops.web.errors.server_error"
