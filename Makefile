# The two commands a newcomer needs:
#   make serve   run the observatory on the embedded default (SQLite + bundled snapshot, offline)
#   make test    install everything the tests need and run them
# Both create ./.venv on first use.

PYTHON ?= python3
VENV   ?= .venv
BIN     = $(VENV)/bin

.PHONY: serve test install install-test browser

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

# torch is pinned to the CPU wheel that these machines carry; see pyproject.toml.
install: $(BIN)/python
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e .

install-test: $(BIN)/python
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e '.[test]'

# Browser tests drive Debian's chromium (never a downloaded browser). Only chromium and what it
# depends on: recommends (udev, upower, ...) would drag systemd along, and nothing else is upgraded.
browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -q && apt-get install -y -q --no-install-recommends chromium; \
	  else echo "chromium missing: sudo apt-get install --no-install-recommends chromium; browser tests will be skipped"; fi; }

serve: install
	$(BIN)/observatory serve

# Five processes, one test file each at a time (--dist loadfile keeps a file's module fixtures in one
# process); a single file or test runs as usual with plain `pytest`. Bytecode is cached even where the
# environment sets PYTHONDONTWRITEBYTECODE: the suite starts about a hundred interpreters (workers,
# commands, servers), and without the cache each compiles our sources and pytest rewrites every test
# module again.
test: install-test browser
	env -u PYTHONDONTWRITEBYTECODE $(BIN)/python -m pytest -n 5 --dist loadfile --durations=25
