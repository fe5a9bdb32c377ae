"""Job log import tasks."""
