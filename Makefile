# sampling-lab: the two contract commands are `make reports` and `make test`.
PYTHON ?= $(shell command -v python3.11 2>/dev/null || command -v python3)
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
JOBS   ?= 2

.PHONY: setup reports test smoke bench clean

setup: $(STAMP)

# (Re)install when pyproject.toml changes; the venv is created only if missing.
$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --upgrade pip
	$(BIN)/python -m pip install -e '.[test]'
	@touch $(STAMP)

# Main job: every notebook with its default parameters into reports/ (replaced only on success).
reports: $(STAMP)
	$(BIN)/sampling-lib run --out reports --jobs $(JOBS)

# Tests: unit, property, doctests and every notebook with its smoke parameters.
test: $(STAMP)
	$(BIN)/python -m pytest

# All notebooks with smoke parameters into a scratch folder (quick look, not the report).
smoke: $(STAMP)
	$(BIN)/python -m sampling_lib run --smoke --out .reports-smoke --jobs $(JOBS)

bench: $(STAMP)
	for f in benchmarks/bench_*.py; do echo "== $$f"; $(BIN)/python $$f || exit 1; done

clean:
	rm -rf .reports-failed .reports-smoke .reports-tmp-* .pytest_cache .hypothesis
