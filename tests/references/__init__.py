"""Per-family numpy reference ops (see tests/reference.py)."""
