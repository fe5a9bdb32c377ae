"""Billing import tasks."""
