"""``python -m benchcert.flows.cli``: the same program as the ``benchcert`` script."""

import sys

from benchcert.flows.cli import main

sys.exit(main())
