"""``python -m services.engine_worker``: run an engine worker (``services.engine_worker.serve``)."""

import sys

from services.engine_worker.serve import main

sys.exit(main())
