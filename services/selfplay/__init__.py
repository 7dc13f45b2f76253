"""Bots play seeded deals against each other (``conquian selfplay``, ``docs/audit.md``).

``deals`` plays one engine deal at a time and tallies a run; ``cli`` is the subcommand;
``record`` plays a run through the table service into a store (``--record``).
"""
