"""Signals for apps that build on the ledger (imports flow one way: they listen, attribution
does not import them)."""

from django.dispatch import Signal

# Sent after a month's attribution committed successfully; kwargs: month (datetime.date).
month_attributed = Signal()
