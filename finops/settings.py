"""Settings, all read from the environment (django-environ).

Embedded default (no environment at all): SQLite in the project folder, Celery eager, console
email. Production and CI set DATABASE_URL, CELERY_BROKER_URL and EMAIL_URL.
"""

from decimal import Decimal
from pathlib import Path

import environ

BASE_DIR = Path(__file__).resolve().parent.parent

env = environ.Env()
environ.Env.read_env(BASE_DIR / ".env", overwrite=False)

DEBUG = env.bool("DJANGO_DEBUG", default=False)
# The embedded default needs some key to start; production must set its own.
SECRET_KEY = env.str("DJANGO_SECRET_KEY", default="insecure-embedded-default-change-me")
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
    "billing_ingest",
    "finops.org",
    "finops.attribution",
    "finops.currency",
    "finops.pricing",
    "finops.inference",
    "finops.notifications",
    "finops.anomalies",
    "finops.tokens",
    "finops.api",
    "finops.web",
    "finops.demo",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

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
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

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

# Where imported files and demo data live.
FINOPS_DATA_DIR = Path(env.str("FINOPS_DATA_DIR", default=str(BASE_DIR / "var")))
# Currency used where a file carries none (the FOCUS spec examples omit BillingCurrency).
# Days Kubernetes API snapshot files are kept after import (each cluster's newest always is).
FINOPS_KUBERNETES_SNAPSHOT_DAYS = env.int("FINOPS_KUBERNETES_SNAPSHOT_DAYS", default=7)
FINOPS_DEFAULT_CURRENCY = env.str("FINOPS_DEFAULT_CURRENCY", default="USD")
# Reports (overview, team page, costs API) convert to this at daily FX rates (finops.currency).
FINOPS_REPORTING_CURRENCY = env.str("FINOPS_REPORTING_CURRENCY", default="USD").upper()
# Tag keys that name the owning team out of the box (DESIGN section 5, step 5).
FINOPS_TEAM_TAG_KEYS = env.list("FINOPS_TEAM_TAG_KEYS", default=["team", "Team", "finops:team"])

# Anomalies (finops.anomalies): an event is reported only when it costs at least this much in
# the reporting currency AND this many percent over the expected value (noise in small series
# pages nobody).
FINOPS_ANOMALY_MIN_IMPACT = Decimal(env.str("FINOPS_ANOMALY_MIN_IMPACT", default="100"))
FINOPS_ANOMALY_MIN_PERCENT = Decimal(env.str("FINOPS_ANOMALY_MIN_PERCENT", default="20"))
# Absolute links in emails (no request to build them from in a worker).
SITE_URL = env.str("SITE_URL", default="http://127.0.0.1:8000").rstrip("/")

# Run after every import for the billing months it touched (found by name: see reattribute.py).
FINOPS_REATTRIBUTE_TASK = "finops.attribution.tasks.attribute_month"

SESSION_COOKIE_HTTPONLY = True
CSRF_COOKIE_HTTPONLY = False
SECURE_CONTENT_TYPE_NOSNIFF = True
X_FRAME_OPTIONS = "DENY"

REST_FRAMEWORK = {
    # Token first: DRF takes the WWW-Authenticate header of a 401 from the first class, and
    # without one answers 403. finops.tokens' hashed per-user keys (fo_...), then DRF's own
    # authtoken keys (admin-made, kept working), then the pages' session.
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "finops.tokens.authentication.ApiTokenAuthentication",
        "rest_framework.authentication.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_FILTER_BACKENDS": ["django_filters.rest_framework.DjangoFilterBackend"],
    "DEFAULT_SCHEMA_CLASS": "finops.api.schema.FinopsAutoSchema",
    "DEFAULT_PAGINATION_CLASS": "finops.api.pagination.BoundedLimitOffsetPagination",
    "PAGE_SIZE": 100,
    "COERCE_DECIMAL_TO_STRING": True,
}

SPECTACULAR_SETTINGS = {
    "TITLE": "GPU FinOps chargeback API",
    "DESCRIPTION": "Cost per team, training run and inference endpoint, reconciled to the bill.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SERVE_PERMISSIONS": ["rest_framework.permissions.IsAuthenticated"],
    # Two models have a `status` choice field; name their enums apart.
    "ENUM_NAME_OVERRIDES": {
        "ImportBatchStatusEnum": "billing_ingest.models.ImportBatch.Status",
        "AnomalyStatusEnum": "finops.anomalies.models.Anomaly.Status",
    },
}

# Celery: no broker configured means eager, in-process execution (the embedded default).
CELERY_BROKER_URL = env.str("CELERY_BROKER_URL", default="")
CELERY_TASK_ALWAYS_EAGER = not CELERY_BROKER_URL
CELERY_TASK_EAGER_PROPAGATES = True
CELERY_RESULT_BACKEND = env.str(
    "CELERY_RESULT_BACKEND", default=CELERY_BROKER_URL if CELERY_BROKER_URL else "cache+memory://"
)
CELERY_TASK_ACKS_LATE = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_TIME_LIMIT = env.int("CELERY_TASK_TIME_LIMIT", default=3600)
CELERY_TASK_SOFT_TIME_LIMIT = env.int("CELERY_TASK_SOFT_TIME_LIMIT", default=3300)
CELERY_TIMEZONE = "UTC"
# Queues by task type, so that a big ingest never delays an alert or an attribution: workers
# are started per queue (README, "Running at scale"). Eager runs (no broker) ignore routes.
# A task not routed here goes to the default queue, attribution (compute work).
FINOPS_TASK_QUEUES = ("ingest", "attribution", "notifications")
CELERY_TASK_DEFAULT_QUEUE = "attribution"
CELERY_TASK_ROUTES = {
    # Exact names first: Celery tries them before the patterns.
    "finops.inference.tasks.ingest_inference_batch": {"queue": "ingest"},
    "finops.anomalies.tasks.send_anomaly_digests": {"queue": "notifications"},
    "billing_ingest.tasks.*": {"queue": "ingest"},
    "finops.currency.tasks.*": {"queue": "ingest"},
    "finops.notifications.tasks.*": {"queue": "notifications"},
    "finops.attribution.tasks.*": {"queue": "attribution"},
    "finops.inference.tasks.*": {"queue": "attribution"},
    "finops.anomalies.tasks.*": {"queue": "attribution"},
}

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
