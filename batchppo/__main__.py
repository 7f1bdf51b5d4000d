"""``python -m batchppo ...``: the same command line as ``batchppo ...``."""

from batchppo.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
