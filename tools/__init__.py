"""The scripts behind the docs' figures and the lab work: python -m tools.NAME (docs/layout.md lists them)."""
