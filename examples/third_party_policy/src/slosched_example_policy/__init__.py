"""A worked example of a third-party slosched policy package (see README.md)."""
