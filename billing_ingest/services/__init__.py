"""Writes for everything that comes in. Split by concern; import from the submodules."""
