"""``python -m zkconsumer`` is the ``zkconsumer`` console script."""

from .cli import main

raise SystemExit(main())
