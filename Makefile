# sampling-lab: the two contract commands are `make reports` and `make test`.
PYTHON ?= $(shell command -v python3.11 2>/dev/null || command -v python3)
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
JOBS   ?= 2
LOCK   := requirements-lock.txt
# The runs below write Python's bytecode cache (__pycache__, ignored by git) even where the environment sets
# PYTHONDONTWRITEBYTECODE: every notebook kernel, CLI subprocess and test worker of a run imports the library,
# and without the cache each compiled it again, and pytest rewrote the tests' asserts again in each worker
# (a seventh of make test's CPU time). The venv's packages are compiled the same way, when first imported.
PYC    := env -u PYTHONDONTWRITEBYTECODE

.PHONY: setup reports test test-slow smoke bench clean lock test-latest strip git-filter

# Notebooks are committed without outputs (tests/test_notebooks.py). JupyterLab writes outputs, execution
# counts and its kernel's metadata into notebooks/: `make strip` takes them out again (nbstripout; cell ids
# are kept, the claims index links to them). `make setup` also installs nbstripout as this clone's git filter
# (git-filter below), so `git add` stages a notebook stripped, whatever the file on disk holds.
NOTEBOOKS ?= notebooks/*.ipynb
NBSTRIPOUT = $(BIN)/nbstripout --keep-id --extra-keys "metadata.language_info.codemirror_mode \
	metadata.language_info.file_extension metadata.language_info.mimetype \
	metadata.language_info.nbconvert_exporter metadata.language_info.pygments_lexer metadata.language_info.version"

setup: $(STAMP)

# (Re)install when pyproject.toml or the lock changes; the venv is created only if missing.
# Exact versions come from the lock (hash-checked), then the project itself without dependencies:
# the environment that produced reports/ (recorded in reports/environment.json and index.html).
# uv (from the package registry, beside the venv's packages in .venv/uv) installs the same hash-checked
# lock in a fraction of pip's time (89 s with pip on 2 cores); where uv cannot be installed, pip does it.
# The venv is made without pip (`venv` installing its bundled pip took 8 s of every fresh setup): the Python's
# own pip puts uv in .venv/uv (`--target`: 3.4 s, against 4.8 s for `pip --python` into the venv), and uv
# then installs pip (pinned) into the venv, for the user. Where the Python has no pip, the venv's bundled pip
# (ensurepip) installs uv. The project is built with the lock's setuptools, without an isolated build
# environment (that took 1.6 s); with one where that fails.
# Not compiled at install (uv's --compile-bytecode took 23 s of a fresh clone's make test to compile every
# module of every package): the targets below write the bytecode of the modules they import, once.
UV_VERSION := 0.13.9
PIP_VERSION := 26.3
UV := $(VENV)/uv/bin/uv
UV_INSTALL := install --quiet --disable-pip-version-check --no-deps --no-compile --upgrade --target $(VENV)/uv \
	uv==$(UV_VERSION)
$(STAMP): pyproject.toml $(LOCK)
	@test -x $(BIN)/python || $(PYTHON) -m venv --without-pip $(VENV)
	@if $(PYTHON) -m pip $(UV_INSTALL) 2>/dev/null || { $(BIN)/python -m ensurepip --default-pip >/dev/null && \
			$(BIN)/python -m pip $(UV_INSTALL); }; then \
		echo "$(UV) pip install --require-hashes -r $(LOCK)" && \
		$(UV) pip install --python $(BIN)/python --require-hashes -r $(LOCK) && \
		$(UV) pip install --python $(BIN)/python --quiet pip==$(PIP_VERSION) && \
		{ $(UV) pip install --python $(BIN)/python --no-deps --no-build-isolation -e . 2>/dev/null || \
		  $(UV) pip install --python $(BIN)/python --no-deps -e . ; } ; \
	else \
		echo "uv not installable: pip installs the lock" && \
		{ $(BIN)/python -m pip --version >/dev/null 2>&1 || $(BIN)/python -m ensurepip --default-pip >/dev/null; } && \
		$(BIN)/python -m pip install --quiet --upgrade pip && \
		$(BIN)/python -m pip install --require-hashes -r $(LOCK) && \
		$(BIN)/python -m pip install --no-deps -e . ; \
	fi
	@$(MAKE) --no-print-directory git-filter
	@touch $(STAMP)

# The git filter (only inside a git work tree; the command runs from the work tree's top, so a relative
# $(BIN) is each clone's or worktree's own venv).
git-filter:
	@if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then \
		git config filter.nbstripout.clean '$(NBSTRIPOUT)' && git config filter.nbstripout.smudge cat && \
		echo "git filter nbstripout installed: notebooks are staged without outputs"; fi

# Strip outputs, execution counts and JupyterLab's metadata from the notebooks (the test names this command).
strip: $(STAMP)
	$(NBSTRIPOUT) $(NOTEBOOKS)

# Regenerate the lock from pyproject.toml's ranges (uv is installed into the venv as a tool only).
lock:
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet uv
	$(BIN)/uv pip compile --quiet pyproject.toml --all-extras --generate-hashes --universal \
		--fork-strategy fewest --python-version 3.11 -o $(LOCK)

# Main job: every notebook with its default parameters into reports/ (replaced only on success).
reports: $(STAMP)
	$(PYC) $(BIN)/sampling-lib run --out reports --jobs $(JOBS)

# Tests: unit, property, doctests and every notebook with its smoke parameters.
test: $(STAMP)
	$(PYC) $(BIN)/python -m pytest

# The quick suite and the tests marked slow (kept out of make test to keep it under 4 minutes on 2 cores).
test-slow: $(STAMP)
	$(PYC) $(BIN)/python -m pytest --runslow

# On demand (not in every CI run): the suite in a fresh venv with the newest versions pyproject allows.
test-latest: $(STAMP)
	SAMPLING_LAB_TEST_LATEST=1 $(BIN)/python -m pytest -m latest tests/test_lock.py -p no:cacheprovider

# All notebooks with smoke parameters into a scratch folder (quick look, not the report).
smoke: $(STAMP)
	$(PYC) $(BIN)/python -m sampling_lib run --smoke --out .reports-smoke --jobs $(JOBS)

bench: $(STAMP)
	for f in benchmarks/bench_*.py; do echo "== $$f"; $(BIN)/python $$f || exit 1; done

clean:
	rm -rf .reports-failed .reports-smoke .reports-tmp-* .reports-old-* .pytest_cache .hypothesis
