"""``python -m services.archive``: the archiver service (``services.archive.service``)."""

from services.archive.service import main

main()
