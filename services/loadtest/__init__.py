"""``conquian loadtest``: concurrent tables against a running service, measured.

``docs/loadtest.md`` is the user's guide.
"""
