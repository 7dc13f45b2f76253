"""``python -m services.projector``."""

import sys

from services.projector.cli import main

if __name__ == "__main__":
    sys.exit(main())
