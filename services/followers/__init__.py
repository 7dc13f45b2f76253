"""The processes that follow the shard feeds and send commands of their own: ``bots_runner``
(the bots' moves) and ``turn_clock`` (a move on a seat's behalf when its time runs out), both on
``feed`` (reading the feeds for table ids, checkpointed).  ``docs/services.md``,
``docs/turn-clock.md``.
"""
