"""The lobby: which tables wait for a player and which a spectator may watch (``docs/api.md``).

``listing`` holds the rows, their keys and the page read; ``cli`` is ``conquian lobby
--rebuild``.
"""
