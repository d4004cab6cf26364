"""``python -m zkconsumer`` is the ``zkconsumer`` console script."""

from zkconsumer.cli import main

raise SystemExit(main())
