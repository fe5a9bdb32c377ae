"""Currencies: FX rates (loaded from CSV or the ECB history) and conversion of reported totals.

Reports convert to settings.FINOPS_REPORTING_CURRENCY per day, at the newest rate on or before
that day, and round once at the end (see selectors.py). Reconciliation stays native.
"""
