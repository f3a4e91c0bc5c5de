# Two commands do all the set-up on a fresh machine:
#   make demo   runs the main job
#   make test   runs the test suite
# Both create the virtual environment .venv on first use.
#   make test-fast  the tests that take under 0.5 s each (under 3 minutes)
#   make durations  the full suite, writing tests/durations.json, which
#                   says which tests test-fast leaves out
#   make coverage-fast  test-fast under coverage.py, then the modules and
#                   functions it never runs (tests/fast_coverage.py)

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
export TF_CPP_MIN_LOG_LEVEL ?= 2

.PHONY: demo test web-client test-fast coverage-fast durations benchmark clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[dev]"
	touch $@

# Fashion-MNIST comes from the Debian package where apt works (root, or
# passwordless sudo); otherwise keras_vit downloads it on first use.
FASHION_MNIST := /usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz

demo: $(VENV)/.installed
	@if [ ! -f $(FASHION_MNIST) ] && command -v apt-get >/dev/null; then \
	  if [ "$$(id -u)" = 0 ]; then apt-get install -y -q dataset-fashion-mnist >/dev/null || true; \
	  elif sudo -n true 2>/dev/null; then sudo apt-get install -y -q dataset-fashion-mnist >/dev/null || true; fi; \
	fi
	$(PY) examples/demo.py

# The browser tests' client (tests/clients/): the pinned
# @mediapipe/tasks-vision from npm (examples/web/package-lock.json) and
# Debian's chromium, installed by apt where it works (root, or passwordless
# sudo). Without them those tests skip, saying why.
WEB := examples/web
$(WEB)/node_modules/.package-lock.json: $(WEB)/package-lock.json
	@if command -v npm >/dev/null; then \
	  npm ci --prefix $(WEB) --no-audit --no-fund --loglevel=error; \
	fi

web-client: $(WEB)/node_modules/.package-lock.json
	@if ! command -v chromium >/dev/null && command -v apt-get >/dev/null; then \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; \
	  elif sudo -n true 2>/dev/null; then SUDO=sudo; else exit 0; fi; \
	  $$SUDO apt-get install -y -q chromium >/dev/null \
	    || { $$SUDO apt-get update -q >/dev/null \
	      && $$SUDO apt-get install -y -q chromium >/dev/null; } || true; \
	fi

# One pytest worker per core (at most 4: each holds a TensorFlow runtime of
# 1-3 GB); an idle worker takes tests queued for a busy one (worksteal).
# `$(PY) -m pytest tests` runs the same suite in one process.
test: $(VENV)/.installed web-client
	$(PY) -m pytest -n auto --maxprocesses 4 --dist worksteal tests

test-fast: $(VENV)/.installed $(WEB)/node_modules/.package-lock.json
	$(PY) -m pytest -n auto --maxprocesses 4 --dist worksteal -m "not slow" tests

# The measurements go to the temporary folder, not into the checkout.
COVERAGE_JSON := $(or $(TMPDIR),/tmp)/keras_vit_fast_coverage.json
coverage-fast: $(VENV)/.installed $(WEB)/node_modules/.package-lock.json
	COVERAGE_FILE=$(COVERAGE_JSON:.json=.data) $(PY) -m pytest -n auto \
	  --maxprocesses 4 --dist worksteal -m "not slow" --cov=keras_vit \
	  --cov-report=json:$(COVERAGE_JSON) tests
	$(PY) tests/fast_coverage.py $(COVERAGE_JSON)

durations: $(VENV)/.installed web-client
	$(PY) -m pytest -n auto --maxprocesses 4 --dist worksteal \
	  --write-durations tests/durations.json tests

benchmark: $(VENV)/.installed
	$(PY) benchmarks/suite.py --model ViT_B16 --batch-size 8 --train

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
