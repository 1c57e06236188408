"""Hermes Web project package. Importing it loads the Celery app (Celery's Django layout)."""

from hermes_web.celery import app as celery_app

__all__ = ["celery_app"]
