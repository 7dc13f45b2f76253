"""The checks of a run that killed processes (``checks``); ``docs/chaos.md``."""
