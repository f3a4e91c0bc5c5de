# Two commands do all the set-up on a fresh machine:
#   make demo   runs the main job
#   make test   runs the test suite
# Both create the virtual environment .venv on first use.

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
export TF_CPP_MIN_LOG_LEVEL ?= 2

.PHONY: demo test benchmark clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[dev]"
	touch $@

demo: $(VENV)/.installed
	$(PY) examples/demo.py

test: $(VENV)/.installed
	$(PY) -m pytest tests

benchmark: $(VENV)/.installed
	$(VENV)/bin/keras-vit benchmark --model ViT_B16 --batch-size 8 --train

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
