"""Secrecy: what a seat or a spectator may see, decided by one function, :func:`sees`.

Views of a state (``engine.views``), the engine's events (``engine.views.visible_event``), wire
events on the gateway's pages and feed (``services.gateway.feed``) and the replay transcript
(``services.audit.replay``) all ask :func:`sees`; the rules and the callers are in
``docs/services.md`` (*Secrecy*).
"""

from __future__ import annotations

Viewer = int | None
"""Who looks: seat 0 or 1, or None for a spectator."""

VIEWERS: tuple[Viewer, ...] = (0, 1, None)
"""Every viewer: the two seats, then the spectator."""

_VIEWER_SET = frozenset(VIEWERS)

SECRET_EVENT_TYPES = frozenset({"hand_dealt"})
"""Wire event types (``events.domain``) that hold one seat's cards: that seat owns them."""


def sees(viewer: Viewer, owner: int | None, *, revealed: bool = False) -> bool:
    """Say whether ``viewer`` may see something that ``owner`` holds.

    ``owner`` None is public (tables, centre card, counts, scores, every event but a dealt
    hand): everyone sees it.  A seat's own (its hand, its dealt cards, its legal actions) is
    seen by that seat, and by everyone once ``revealed`` (its deal is over).  What nobody owns
    (the stock's order, a deal's seed before ``deal_revealed``) is never given to this function:
    views hold only counts of it.  Raises ValueError for a viewer that is not 0, 1 or None.

    >>> [sees(v, 0) for v in VIEWERS], sees(None, 1, revealed=True), sees(1, None)
    ([True, False, False], True, True)
    """
    if viewer not in _VIEWER_SET:
        check_viewer(viewer)
    return owner is None or owner == viewer or revealed


def check_viewer(viewer: object) -> None:
    """Raise ValueError unless ``viewer`` is one of :data:`VIEWERS`."""
    if viewer not in VIEWERS:
        raise ValueError(f"there is no seat {viewer!r}: seats are 0 and 1 (None for a spectator)")


def event_owner(kind: str, seat: object) -> int | None:
    """Return the seat that owns a wire event of type ``kind`` whose ``seat`` field is ``seat``:
    that seat for a :data:`SECRET_EVENT_TYPES` event, None (public) for any other."""
    if kind in SECRET_EVENT_TYPES and isinstance(seat, int):
        return seat
    return None


def hashes_shown(version: int, deal_started_at: int | None) -> bool:
    """Say whether the envelope at ``version`` goes out with its ``hash`` and ``prev_hash``.

    Not while a deal is in play, for any viewer: after that deal's ``deal_started`` (at
    ``deal_started_at``, None when no deal is in play) the hashes would let a seat try the
    opponent's possible hands against them.  Once ``deal_revealed`` the deck is public and the
    hashes go out again (``docs/services.md``, *Secrecy*).
    """
    return deal_started_at is None or version <= deal_started_at
