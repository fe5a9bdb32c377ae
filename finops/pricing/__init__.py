"""Catalogue prices for pricing comparisons (DESIGN 6): what a GPU-hour costs on demand, on
spot / preemptible and under 1- and 3-year commitments, per provider, SKU and region.

GCP prices come from the Cloud Catalog API (google-cloud-billing) or a saved `skus.list`
response; each unit price is kept exactly as the API gives it (units + nanos / 10^9).
"""
