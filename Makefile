# Two entry points, each installing and building whatever is missing first:
#   make demo   trains a small model on the tpu device and prints what it did
#   make test   runs the test suite
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.deps-installed
ZOO_PACKAGES := $(VENV)/zoo-packages
ZOO_STAMP := $(ZOO_PACKAGES)/.installed

.PHONY: demo test build bench zoo zoo-deps clean

$(STAMP): requirements.txt
	python3 -m venv $(VENV)
	$(PY) -m pip install --quiet -r requirements.txt
	@command -v ccache >/dev/null 2>&1 || (command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ] && \
	  (apt-get install -y -qq ccache >/dev/null 2>&1 || (apt-get update -qq >/dev/null 2>&1 && \
	   apt-get install -y -qq ccache >/dev/null 2>&1)) || echo "ccache not installed: rebuilds from scratch are slower")
	touch $(STAMP)

# timm and torchvision for the model zoo, apart from the environment (see requirements-zoo.txt).
$(ZOO_STAMP): requirements-zoo.txt $(STAMP)
	$(PY) -m pip install --quiet --no-deps --upgrade --target $(ZOO_PACKAGES) -r requirements-zoo.txt
	touch $(ZOO_STAMP)

zoo-deps: $(ZOO_STAMP)

build: $(STAMP)
	$(PY) -m pip install --quiet --no-build-isolation --no-deps -e .

demo: build
	$(PY) -m torch_tpu.demo

test: build zoo-deps
	$(PY) -m pytest -q tests

bench: build
	$(PY) benchmarks/dispatch.py
	$(PY) benchmarks/cache_warmstart.py
	$(PY) benchmarks/modes.py --quick
	$(VENV)/bin/torchrun --nproc-per-node 2 benchmarks/allreduce.py

# Every Transformers, diffusers and timm architecture in every mode (long; resumes from model_zoo_results/).
zoo: build zoo-deps
	$(PY) -m torch_tpu.tools.model_zoo --out model_zoo_results

clean:
	rm -rf build torch_tpu/_C*.so
