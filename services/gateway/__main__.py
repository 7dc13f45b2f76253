"""``python -m services.gateway``: serve the gateway (see ``services.gateway.serve``)."""

import sys

from services.gateway.serve import main

sys.exit(main())
