"""The tests under tests/algorithms: pytest puts this folder on ``sys.path`` (as it does for
every conftest's folder), where their test files import ``cold_programs`` from."""
