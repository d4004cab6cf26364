"""``python -m zkconsumer`` is the ``zkconsumer`` console script."""

from zkconsumer.cli import main

if __name__ == "__main__":  # (also imported, by the doctest run)
    raise SystemExit(main())
