"""The table as the services see it: folded from its events, deciding a command, appending the
events with the table's stored view parts.

A command passes ``service`` (load, plan, append; one command or many over many tables)
→ ``decide`` (the engine's rules and the table's) → ``table`` (the value and its one fold) →
``stored_parts`` (the views stored with the append); ``docs/services.md`` has the whole chain.
"""
