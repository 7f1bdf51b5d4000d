"""The investigation scripts' tests share tests/bench's ``benchlib`` (``load_bench``)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
