import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "finops.settings")
application = get_wsgi_application()

# The URLconf and the page templates loaded now, not by the process's first request
# (finops/warmup.py).
from finops.warmup import warm_up  # noqa: E402

warm_up()
