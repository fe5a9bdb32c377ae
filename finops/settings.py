"""Settings, all read from the environment (django-environ).

Embedded default (no environment at all): SQLite in the project folder, Celery eager, console
email. Production and CI set DATABASE_URL, CELERY_BROKER_URL and EMAIL_URL.
"""

import re
from datetime import timedelta
from decimal import Decimal, InvalidOperation
from pathlib import Path

import environ
from django.core.exceptions import ImproperlyConfigured

from finops.secret_key import secret_key_load

BASE_DIR = Path(__file__).resolve().parent.parent

env = environ.Env()
environ.Env.read_env(BASE_DIR / ".env", overwrite=False)


def _env_bool(name: str, default: bool) -> bool:
    """DJANGO_<name>, else <name> (Django's own setting name), else default."""
    return env.bool(f"DJANGO_{name}", default=env.bool(name, default=default))


def _attribution_parts(value: str) -> int | None:
    """FINOPS_ATTRIBUTION_PARTS: "auto" (None) or a count of at least 1."""
    if value.strip().lower() == "auto":
        return None
    if not value.strip().isdigit() or int(value) < 1:
        raise ImproperlyConfigured(f"FINOPS_ATTRIBUTION_PARTS={value!r}: 'auto' or a number >= 1")
    return int(value)


def _attribution_engine(value: str) -> str:
    """FINOPS_ATTRIBUTION_ENGINE: "python" (per row) or "vector" (on columns, issue 34)."""
    if value not in ("python", "vector"):
        raise ImproperlyConfigured(f"FINOPS_ATTRIBUTION_ENGINE={value!r}: 'python' or 'vector'")
    return value


DEBUG = env.bool("DJANGO_DEBUG", default=False)
# Where imported files, demo data and the generated secret key live.
FINOPS_DATA_DIR = Path(env.str("FINOPS_DATA_DIR", default=str(BASE_DIR / "var")))
# DJANGO_SECRET_KEY, else a random key generated once and kept in the data folder (mode 0600).
# There is no public fallback: a known key lets anyone forge sessions and password resets.
SECRET_KEY = secret_key_load(env_value=env.str("DJANGO_SECRET_KEY", default=""),
                             data_dir=FINOPS_DATA_DIR)  # fmt: skip
ALLOWED_HOSTS = env.list("DJANGO_ALLOWED_HOSTS", default=["127.0.0.1", "localhost", "testserver"])
CSRF_TRUSTED_ORIGINS = env.list("DJANGO_CSRF_TRUSTED_ORIGINS", default=[])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "django.contrib.humanize",
    "rest_framework",
    "rest_framework.authtoken",
    "django_filters",
    "drf_spectacular",
    "axes",
    "billing_ingest",
    "finops.org",
    "finops.attribution",
    "finops.currency",
    "finops.pricing",
    "finops.inference",
    "finops.run_metrics",
    "finops.energy",
    "finops.economics",
    "finops.notifications",
    "finops.anomalies",
    "finops.budgets",
    "finops.audit",
    "finops.chargeback",
    "finops.pipeline",
    "finops.tokens",
    "finops.exports",
    "finops.api",
    "finops.web",
    "finops.demo",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "finops.csp.ContentSecurityPolicyMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    # A person signed in through SSO is checked with the provider again (silently) once their
    # ID token is older than OIDC_RENEW_ID_TOKEN_EXPIRY_SECONDS: a role taken away there is
    # taken away here. A no-op for password logins and without SSO.
    "finops.org.sso.SessionRefresh",
    # A NUL in the path, a query parameter or a form field is a 400 naming it (finops.text).
    "finops.text.NulRejectMiddleware",
    # A read-only viewer's POST/PUT/PATCH/DELETE is refused everywhere (pages, admin, API).
    "finops.org.permissions.ViewerReadOnlyMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # Last, as django-axes asks: turns a locked-out login into the lockout page.
    "axes.middleware.AxesMiddleware",
]

AUTHENTICATION_BACKENDS = [
    # First: refuses any login (pages, admin) while the username + address is locked out.
    "axes.backends.AxesStandaloneBackend",
    # Username + password, unless FINOPS_LOCAL_PASSWORDS=0 (then it only answers permissions).
    "finops.org.sso.LocalPasswordBackend",
    # The company's OpenID Connect provider, when OIDC_* below configure it (finops.org.sso).
    "finops.org.sso.FinopsOIDCBackend",
]
# Single sign-on (OpenID Connect, mozilla-django-oidc): the provider's endpoints (its
# /.well-known/openid-configuration lists them) and this site's client. Its redirect URI is
# <site>/oidc/callback/. Unset: no SSO button, local passwords only. Who gets which role is
# decided by the sign-in rules finance edits (Onboarding page): finops.org.models.SsoRule.
OIDC_OP_AUTHORIZATION_ENDPOINT = env.str("OIDC_OP_AUTHORIZATION_ENDPOINT", default="")
OIDC_OP_TOKEN_ENDPOINT = env.str("OIDC_OP_TOKEN_ENDPOINT", default="")
OIDC_OP_USER_ENDPOINT = env.str("OIDC_OP_USER_ENDPOINT", default="")
OIDC_OP_JWKS_ENDPOINT = env.str("OIDC_OP_JWKS_ENDPOINT", default="")
OIDC_RP_CLIENT_ID = env.str("OIDC_RP_CLIENT_ID", default="")
OIDC_RP_CLIENT_SECRET = env.str("OIDC_RP_CLIENT_SECRET", default="")
OIDC_RP_SIGN_ALGO = env.str("OIDC_RP_SIGN_ALGO", default="RS256")
OIDC_RP_SCOPES = env.str("OIDC_RP_SCOPES", default="openid email profile groups")
OIDC_USE_PKCE = True
OIDC_TIMEOUT = env.int("OIDC_TIMEOUT", default=10)
LOGIN_REDIRECT_URL_FAILURE = "/accounts/login/"
OIDC_CALLBACK_CLASS = "finops.org.sso.CallbackView"
OIDC_RENEW_ID_TOKEN_EXPIRY_SECONDS = env.int("OIDC_RENEW_ID_TOKEN_EXPIRY_SECONDS", default=15 * 60)
# The pages' own fetches of the API and static files are never sent to the provider.
OIDC_EXEMPT_URLS = [re.compile(r"^/(api|static)/")]
# The sign-in button's words, e.g. "Sign in with Okta".
FINOPS_SSO_LABEL = env.str("FINOPS_SSO_LABEL", default="Sign in with company SSO")
# Off (0): nobody logs in with a local password (pages, admin); SSO and API tokens only.
FINOPS_LOCAL_PASSWORDS = env.bool("FINOPS_LOCAL_PASSWORDS", default=True)
# Login lockout (django-axes): after this many wrong passwords for one username from one
# address, every login of that pair (the right password too) is refused for the cool-off.
# Locking the pair, not the username alone, keeps a stranger from locking finance out.
AXES_FAILURE_LIMIT = env.int("FINOPS_LOGIN_FAILURE_LIMIT", default=5)
AXES_COOLOFF_TIME = timedelta(minutes=env.int("FINOPS_LOGIN_LOCKOUT_MINUTES", default=15))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_TEMPLATE = "registration/locked_out.html"
# Behind N reverse proxies, the client address is the N-th from the right of X-Forwarded-For;
# with 0 (the default) X-Forwarded-For is ignored: anyone can write it. One definition
# (finops.client_address) for the login lockout and the API token throttle.
FINOPS_PROXY_COUNT = env.int("FINOPS_PROXY_COUNT", default=0)
AXES_CLIENT_IP_CALLABLE = "finops.client_address.client_address"
# Single sign-on callbacks are not password guesses: never counted (finops.org.sso).
AXES_WHITELIST_CALLABLE = "finops.org.sso.lockout_exempt"

# Failed-token counts (finops.api.authentication) live here; several web processes need a
# shared cache (CACHE_URL=redis://...) for one count, else each process counts its own.
CACHES = {"default": env.cache_url("CACHE_URL", default="locmemcache://")}
# JSON answers of the read endpoints (costs, runs, budgets, teams) are cached there, keyed by
# the data version and the caller's scope (finops/api/cache.py); 0 turns the cache off.
FINOPS_API_CACHE_SECONDS = env.int("FINOPS_API_CACHE_SECONDS", default=300)

ROOT_URLCONF = "finops.urls"
WSGI_APPLICATION = "finops.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

DATABASES = {"default": env.db("DATABASE_URL", default=f"sqlite:///{BASE_DIR / 'db.sqlite3'}")}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # Attribution writes in long transactions; wait for the lock instead of failing at once.
    DATABASES["default"].setdefault("OPTIONS", {})["timeout"] = 60
    # Write-ahead log: the web process reads while the demo or a worker writes (a rollback
    # journal failed a demo build with "database is locked" when a page was opened), and
    # synchronous=NORMAL syncs at checkpoints, not at every commit (WAL stays consistent after a
    # crash; only the last commits before a power loss can be lost: the embedded default's trade).
    DATABASES["default"]["OPTIONS"]["init_command"] = (
        "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"
    )
# Keep a web process's connection between requests: opening one per request (Django's default)
# costs a PostgreSQL backend fork and the handshake, which dominated a cached API answer on 2
# cores (bench/api_load.py). No CONN_HEALTH_CHECKS: they add a round trip to every request; a
# connection the server dropped fails one request, and Django then closes it.
DATABASES["default"]["CONN_MAX_AGE"] = env.int("FINOPS_DB_CONN_MAX_AGE", default=60)
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# Applied where people choose passwords (admin forms, createsuperuser, password change), not to
# User.objects.create_user in code and tests.
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {
        "NAME": "django.contrib.auth.password_validation.MinimumLengthValidator",
        "OPTIONS": {"min_length": 12},
    },
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

# Django fixtures (teams, users, rules) shared by the demo and the tests: loaddata NAME.
FIXTURE_DIRS = [BASE_DIR / "fixtures" / "django"]

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "staticfiles"
STATICFILES_DIRS = [BASE_DIR / "static"]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "web:overview"
LOGOUT_REDIRECT_URL = "login"

# Uploads: a billing file larger than this must come through ingest_billing or a bucket URI.
DATA_UPLOAD_MAX_MEMORY_SIZE = env.int("DATA_UPLOAD_MAX_MEMORY_SIZE", default=10 * 1024 * 1024)
FILE_UPLOAD_MAX_MEMORY_SIZE = env.int("FILE_UPLOAD_MAX_MEMORY_SIZE", default=10 * 1024 * 1024)
FINOPS_UPLOAD_MAX_BYTES = env.int("FINOPS_UPLOAD_MAX_BYTES", default=200 * 1024 * 1024)
# Longest line a line-oriented reader (CSV, sacct, Prometheus text, JSON lines) reads before
# failing with the file and line: a line is read whole, so this bounds a worker's memory.
FINOPS_MAX_LINE_BYTES = env.int("FINOPS_MAX_LINE_BYTES", default=4 * 1024 * 1024)
# What one input file may make a reader do (billing_ingest/parsers/bounds.py): bytes out of a
# gzip or zip, and its compression ratio (judged past 64 MiB out); blank lines in a row and in
# all; CSV columns; JSON nesting (files, and API bodies: deeper is a 400).
FINOPS_MAX_DECOMPRESSED_BYTES = env.int("FINOPS_MAX_DECOMPRESSED_BYTES", default=32 * 1024**3)
FINOPS_MAX_COMPRESSION_RATIO = env.int("FINOPS_MAX_COMPRESSION_RATIO", default=200)
FINOPS_MAX_EMPTY_LINES_IN_A_ROW = env.int("FINOPS_MAX_EMPTY_LINES_IN_A_ROW", default=1_000)
FINOPS_MAX_EMPTY_LINES = env.int("FINOPS_MAX_EMPTY_LINES", default=100_000)
FINOPS_MAX_COLUMNS = env.int("FINOPS_MAX_COLUMNS", default=5_000)
FINOPS_MAX_JSON_DEPTH = env.int("FINOPS_MAX_JSON_DEPTH", default=64)

# Currency used where a file carries none (the FOCUS spec examples omit BillingCurrency).
# Days Kubernetes API snapshot files are kept after import (each cluster's newest always is).
FINOPS_KUBERNETES_SNAPSHOT_DAYS = env.int("FINOPS_KUBERNETES_SNAPSHOT_DAYS", default=7)
FINOPS_DEFAULT_CURRENCY = env.str("FINOPS_DEFAULT_CURRENCY", default="USD")
# Reports (overview, team page, costs API) convert to this at daily FX rates (finops.currency).
# The month-end checklist warns when the unallocated share of a month's amortised bill (per
# billing currency) is above this percentage.
FINOPS_CLOSE_UNALLOCATED_PERCENT = env.str("FINOPS_CLOSE_UNALLOCATED_PERCENT", default="5")
FINOPS_REPORTING_CURRENCY = env.str("FINOPS_REPORTING_CURRENCY", default="USD").upper()
# Where people open the pages: links in emails (statements) are built on it.
FINOPS_BASE_URL = env.str("FINOPS_BASE_URL", default="http://127.0.0.1:8000").rstrip("/")
# Tag keys that name the owning team out of the box (DESIGN section 5, step 5).
FINOPS_TEAM_TAG_KEYS = env.list("FINOPS_TEAM_TAG_KEYS", default=["team", "Team", "finops:team"])

# Anomalies (finops.anomalies): an event is reported only when it costs at least this much in
# the reporting currency AND this many percent over the expected value (noise in small series
# pages nobody).
FINOPS_ANOMALY_MIN_IMPACT = Decimal(env.str("FINOPS_ANOMALY_MIN_IMPACT", default="100"))
FINOPS_ANOMALY_MIN_PERCENT = Decimal(env.str("FINOPS_ANOMALY_MIN_PERCENT", default="20"))
# Budgets. Quarters and years start in this month (1 = January).
FINOPS_FISCAL_YEAR_START_MONTH = env.int("FINOPS_FISCAL_YEAR_START_MONTH", default=1)
# Days a provider's bill lags behind (not delivered in full yet): forecast, never counted as 0.
# Keys are ledger provider names; others use the "*" entry.
FINOPS_BILL_LAG_DAYS = {
    "*": 1,
    "AWS": 1,
    "Amazon Web Services": 1,
    "GCP": 1,
    "Google Cloud": 1,
    "Azure": 3,
    "Microsoft": 3,
    "Microsoft Azure": 3,
    **env.json("FINOPS_BILL_LAG_DAYS", default={}),
}
# FOCUS ChargeCategory values whose lines recur (monthly commitment fees, support): a budget
# forecast counts them once, on their days, and never extrapolates them.
FINOPS_BUDGET_RECURRING_CHARGE_CATEGORIES = env.list(
    "FINOPS_BUDGET_RECURRING_CHARGE_CATEGORIES", default=["Purchase"]
)
# Addresses a budget may list as recipients besides the organisation's users (an active user's
# address always may): whole domains, e.g. "example.com,finance.example.com" (exact domains, a
# subdomain is listed on its own). Empty: the organisation's users only.
FINOPS_BUDGET_RECIPIENT_DOMAINS = [
    d.strip().lower().lstrip("@")
    for d in env.list("FINOPS_BUDGET_RECIPIENT_DOMAINS", default=[])
    if d.strip()
]
# Absolute links in emails (no request to build them from in a worker).
SITE_URL = env.str("SITE_URL", default="http://127.0.0.1:8000").rstrip("/")

# Waste advice (finops.waste.advice, Young/Daly): the minutes a training run takes to write one
# checkpoint (C in tau* = sqrt(2 C M)), when the run metrics do not show it. Positive.
FINOPS_CHECKPOINT_WRITE_MINUTES = Decimal(env.str("FINOPS_CHECKPOINT_WRITE_MINUTES", default="2"))
if not FINOPS_CHECKPOINT_WRITE_MINUTES.is_finite() or FINOPS_CHECKPOINT_WRITE_MINUTES <= 0:
    raise ImproperlyConfigured(
        "FINOPS_CHECKPOINT_WRITE_MINUTES must be a positive number of minutes"
    )

# Materiality floor of the waste advice (finops.waste.recommendations: checkpoint intervals,
# idle allocations): a saving under this much a month, in the recommendation's own currency, is
# not made an open recommendation (the team page still shows the figure in its table: it is
# just not advice to act on; 0.06 or 0.20 USD a month is noise). Absolute, not a share of the
# team's cost: acting on advice costs about the same work whatever the team's bill (a job
# script or a GPU request changed), and a share would hide real money at a large team (0.05 %
# of 1,000,000 a month is 500) while still advising cents at a small one. 0: every saving of
# a cent or more, as before the floor. A currency of small units (JPY) needs a larger figure.
try:
    FINOPS_ADVICE_MIN_MONTHLY_SAVING = Decimal(
        env.str("FINOPS_ADVICE_MIN_MONTHLY_SAVING", default="25").strip()
    )
except InvalidOperation:
    FINOPS_ADVICE_MIN_MONTHLY_SAVING = Decimal("NaN")
if not FINOPS_ADVICE_MIN_MONTHLY_SAVING.is_finite() or FINOPS_ADVICE_MIN_MONTHLY_SAVING < 0:
    raise ImproperlyConfigured(
        "FINOPS_ADVICE_MIN_MONTHLY_SAVING must be a number of at least 0 (a monthly saving)"
    )

# GET /metrics (Prometheus): the newest months with a ledger or a bill it exposes.
FINOPS_METRICS_MONTHS = env.int("FINOPS_METRICS_MONTHS", default=12)
# Chat and webhook channels (finops.notifications): hosts a channel may post to although they
# resolve to a private, loopback or link-local address (e.g. an internal relay). Host names or
# IP addresses, compared case-insensitively; a `host:port` entry allows that port only.
FINOPS_WEBHOOK_ALLOWED_HOSTS = env.list("FINOPS_WEBHOOK_ALLOWED_HOSTS", default=[])
# Seconds a webhook POST may take (connect and answer) before it counts as failed and is retried.
FINOPS_WEBHOOK_TIMEOUT = env.int("FINOPS_WEBHOOK_TIMEOUT", default=10)

# Crash safety (finops.core.heartbeat, finops.pipeline): a running step touches its row every
# HEARTBEAT_SECONDS; one silent for HEARTBEAT_TIMEOUT belongs to a dead worker and is failed
# with that reason. A pipeline run waiting in the queue with no step running is given up on
# after QUEUED_TIMEOUT (a long backlog is not a dead worker). Commands poll every POLL_SECONDS.
FINOPS_WORKER_HEARTBEAT_SECONDS = env.float("FINOPS_WORKER_HEARTBEAT_SECONDS", default=30)
FINOPS_WORKER_HEARTBEAT_TIMEOUT = env.float("FINOPS_WORKER_HEARTBEAT_TIMEOUT", default=5 * 60)
FINOPS_PIPELINE_QUEUED_TIMEOUT = env.float("FINOPS_PIPELINE_QUEUED_TIMEOUT", default=3 * 3600)
FINOPS_PIPELINE_RETRY_SECONDS = env.float("FINOPS_PIPELINE_RETRY_SECONDS", default=10)
FINOPS_COMMAND_POLL_SECONDS = env.float("FINOPS_COMMAND_POLL_SECONDS", default=2)

SESSION_COOKIE_HTTPONLY = True
CSRF_COOKIE_HTTPONLY = False
SECURE_CONTENT_TYPE_NOSNIFF = True
X_FRAME_OPTIONS = "DENY"
# HTTPS, switched on from the environment (DJANGO_<NAME> or <NAME>) where the site is served
# over TLS; off by default so the embedded default works on http://127.0.0.1.
SESSION_COOKIE_SECURE = _env_bool("SESSION_COOKIE_SECURE", False)
CSRF_COOKIE_SECURE = _env_bool("CSRF_COOKIE_SECURE", False)
SECURE_SSL_REDIRECT = _env_bool("SECURE_SSL_REDIRECT", False)
SECURE_HSTS_SECONDS = env.int(
    "DJANGO_SECURE_HSTS_SECONDS", default=env.int("SECURE_HSTS_SECONDS", default=0)
)
SECURE_HSTS_INCLUDE_SUBDOMAINS = _env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", False)
SECURE_HSTS_PRELOAD = _env_bool("SECURE_HSTS_PRELOAD", False)
# Behind a TLS-terminating proxy: "HTTP_X_FORWARDED_PROTO,https" (header, value). Only set it
# when the proxy always sets (and strips client copies of) that header.
_PROXY_SSL_HEADER = env.list(
    "DJANGO_SECURE_PROXY_SSL_HEADER", default=env.list("SECURE_PROXY_SSL_HEADER", default=[])
)
SECURE_PROXY_SSL_HEADER = (
    (_PROXY_SSL_HEADER[0], _PROXY_SSL_HEADER[1]) if len(_PROXY_SSL_HEADER) == 2 else None
)
# Scripts, styles, images and fonts from our own origin only; no inline script or style
# attribute (templates keep none; Chart.js styles its canvas through the CSSOM, which CSP
# allows). Sent by finops.csp.ContentSecurityPolicyMiddleware.
FINOPS_CONTENT_SECURITY_POLICY = env.str(
    "FINOPS_CONTENT_SECURITY_POLICY",
    default="default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "font-src 'self'; connect-src 'self'; object-src 'none'; base-uri 'self'; "
    "form-action 'self'; frame-ancestors 'none'",
)

REST_FRAMEWORK = {
    # Token first: DRF takes the WWW-Authenticate header of a 401 from the first class, and
    # without one answers 403. finops.tokens' hashed per-user keys (fo_...), then DRF's own
    # authtoken keys (admin-made, kept working), then the pages' session.
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "finops.api.authentication.ThrottledApiTokenAuthentication",
        "finops.api.authentication.ThrottledTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_THROTTLE_RATES": {
        "token_failure": env.str("FINOPS_TOKEN_FAILURE_RATE", default="20/hour"),
    },
    # 0, not None: DRF trusts the whole X-Forwarded-For when NUM_PROXIES is None.
    "NUM_PROXIES": FINOPS_PROXY_COUNT,
    "DEFAULT_PERMISSION_CLASSES": [
        "rest_framework.permissions.IsAuthenticated",
        "finops.org.permissions.ViewerReadOnly",
    ],
    "DEFAULT_FILTER_BACKENDS": ["django_filters.rest_framework.DjangoFilterBackend"],
    "DEFAULT_SCHEMA_CLASS": "finops.api.schema.FinopsAutoSchema",
    # JSON (and the browsable API) plus CSV downloads: ?format=csv on any list, same filters.
    "DEFAULT_RENDERER_CLASSES": [
        "finops.api.renderers.JSONRenderer",
        "rest_framework.renderers.BrowsableAPIRenderer",
        "finops.api.csv.CsvRenderer",
    ],
    # Pages of at most 1000 rows for JSON (a limit or offset out of bounds is a 400 naming the
    # field); a CSV download is every matching row.
    "DEFAULT_PAGINATION_CLASS": "finops.api.pagination.CsvAwarePagination",
    "PAGE_SIZE": 100,
    "COERCE_DECIMAL_TO_STRING": True,
    # Bodies are JSON only: a form or multipart body is a 415. Every value then has a JSON type,
    # which the API's fields insist on (finops.api.fields: true is a boolean, "1950.00" a decimal).
    # JSON nested deeper than FINOPS_MAX_JSON_DEPTH is a 400 (finops/api/parsers.py).
    "DEFAULT_PARSER_CLASSES": ["finops.api.parsers.BoundedJSONParser"],
    "TEST_REQUEST_DEFAULT_FORMAT": "json",
    # A query parameter given must have a value: `?team=` is a 400, not "no filter".
    "DEFAULT_CONTENT_NEGOTIATION_CLASS": "finops.api.negotiation.StrictQueryNegotiation",
}

SPECTACULAR_SETTINGS = {
    "TITLE": "GPU FinOps chargeback API",
    "DESCRIPTION": "Cost per team, training run and inference endpoint, reconciled to the bill.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SERVE_PERMISSIONS": ["rest_framework.permissions.IsAuthenticated"],
    # Several models have a `status`: each choice set gets its own stable enum name.
    "ENUM_NAME_OVERRIDES": {
        "ImportBatchStatusEnum": "billing_ingest.models.ImportBatch.Status",
        "AnomalyStatusEnum": "finops.anomalies.models.Anomaly.Status",
        "RecommendationStatusEnum": "finops.pricing.models.Recommendation.Status",
        "RecommendationConfidenceEnum": "finops.pricing.models.Recommendation.Confidence",
        "NotificationChannelKindEnum": "finops.notifications.models.NotificationChannel.Kind",
        "NotificationEventEnum": "finops.notifications.models.NotificationChannel.Event",
        "PeriodCheckStatusEnum": "finops.chargeback.checks.CHECK_STATUSES",
    },
}

# DCGM energy fetched daily from Prometheus servers (finops/energy/prometheus_fetch.py): one
# base URL per cluster, "hpc=http://prometheus:9090,k8s=https://prom.example"; none by default.
FINOPS_ENERGY_PROMETHEUS = env.dict("FINOPS_ENERGY_PROMETHEUS", default={})
FINOPS_ENERGY_WINDOW_DAYS = env.int("FINOPS_ENERGY_WINDOW_DAYS", default=35)
# Recommendations computed outside pricing and stored with its own (finops.pricing.
# recommendations._other_drafts): waste's checkpoint interval and idle-allocation advice, read
# from the checkpoint advice the run_economics step stored, while current (else computed:
# finops.economics.advice).
FINOPS_RECOMMENDATION_SOURCES = ["finops.economics.advice.stored_waste_drafts"]
# Parts a month's attribution is split into across workers (a chord; finops.attribution.tasks).
# "auto" (None here): one part per FINOPS_ATTRIBUTION_PART_LINE_ITEMS of the month's line items,
# so a month that grows is split before one process needs more memory than a worker has
# (10,000 nodes, 7.4M line items: 13 GB in one process; 3.8 GB per part of 930k: bench/README).
# A number fixes the count (1: one process). Eager runs (no broker) always use one process.
FINOPS_ATTRIBUTION_PARTS = _attribution_parts(env.str("FINOPS_ATTRIBUTION_PARTS", default="auto"))
FINOPS_ATTRIBUTION_PART_LINE_ITEMS = env.int("FINOPS_ATTRIBUTION_PART_LINE_ITEMS", default=10**6)
# The first pass of each part: "vector" (hourly GPU node lines on NumPy columns, the rest per
# row; engine/vector.py) or "python" (the per-row engine). The same ledger to the last decimal
# (tests/attribution/test_attribution_vector.py, bench/attribution.py compares them row by row).
FINOPS_ATTRIBUTION_ENGINE = _attribution_engine(
    env.str("FINOPS_ATTRIBUTION_ENGINE", default="vector").strip().lower()
)
# With "vector" on PostgreSQL, read the GPU node lines as columns by binary COPY (inputs/
# line_columns.py) rather than as rows; off only to compare the two reads.
FINOPS_ATTRIBUTION_COLUMNS = env.bool("FINOPS_ATTRIBUTION_COLUMNS", default=True)

# Celery (finops/settings_celery.py): broker, acknowledgements, time limits, queues and routes.
# Imported here, after .env was read, so its values count there too.
from finops.settings_celery import *  # noqa: E402, F403

EMAIL_CONFIG = env.email_url("EMAIL_URL", default="consolemail://")
vars().update(EMAIL_CONFIG)
DEFAULT_FROM_EMAIL = env.str("DEFAULT_FROM_EMAIL", default="finops@localhost")

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env.str("LOG_LEVEL", default="WARNING")},
    "loggers": {"finops": {"level": env.str("LOG_LEVEL", default="INFO")}},
}
