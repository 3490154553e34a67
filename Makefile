# Two entry points, each installing and building whatever is missing first:
#   make demo   trains a small model on the tpu device and prints what it did
#   make test   runs the test suite
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.deps-installed

.PHONY: demo test build bench zoo clean

$(STAMP): requirements.txt
	python3 -m venv $(VENV)
	$(PY) -m pip install --quiet -r requirements.txt
	@command -v ccache >/dev/null 2>&1 || (command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ] && \
	  (apt-get install -y -qq ccache >/dev/null 2>&1 || (apt-get update -qq >/dev/null 2>&1 && \
	   apt-get install -y -qq ccache >/dev/null 2>&1)) || echo "ccache not installed: rebuilds from scratch are slower")
	touch $(STAMP)

build: $(STAMP)
	$(PY) -m pip install --quiet --no-build-isolation --no-deps -e .

demo: build
	$(PY) -m torch_tpu.demo

test: build
	$(PY) -m pytest -q tests

bench: build
	$(PY) benchmarks/dispatch.py
	$(PY) benchmarks/cache_warmstart.py
	$(PY) benchmarks/modes.py --quick
	$(VENV)/bin/torchrun --nproc-per-node 2 benchmarks/allreduce.py

# Every Transformers and diffusers architecture in every mode (long; resumes from model_zoo_results/).
zoo: build
	$(PY) -m torch_tpu.tools.model_zoo --out model_zoo_results

clean:
	rm -rf build torch_tpu/_C*.so
