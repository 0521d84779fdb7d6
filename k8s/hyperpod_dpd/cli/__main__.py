"""``python -m hyperpod_dpd.cli``: the same as the ``hyperpod-dpd`` console script."""

import sys

from hyperpod_dpd.cli import main

sys.exit(main())
