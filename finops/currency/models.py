"""Models: see the app docstring."""
