# Load the Celery app whenever Django starts so that @shared_task binds to it.
from finops.celery import app as celery_app

__all__ = ("celery_app",)
