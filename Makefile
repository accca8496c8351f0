# slidepipe — the two commands a user needs: `make demo` and `make test`. Both install what is
# missing first (scripts/bootstrap), so they work on a fresh Debian 12 machine.
BUILD      ?= build
ASAN_BUILD ?= build-asan
FUZZ_BUILD ?= build-fuzz
TSAN_BUILD ?= build-tsan
# The unit tests that exercise threads, built and run under ThreadSanitizer by `make tsan`.
TSAN_TESTS ?= test_tile_cache test_batch test_api test_ops test_spectrum_stats test_durable_renames test_zarr_shards test_io_pool test_least_wait test_pixel_hash test_loader test_augment_color test_tile_qc test_augment_geometry test_thread_pool
VENV       ?= .venv
JOBS       ?= $(shell nproc)
PYTHON     ?= python3
FUZZ_SECONDS ?= 7
# The Python binding is built for the interpreter that makes the test venv.
PYTHON_HINT = -DPython3_EXECUTABLE=$(shell command -v $(PYTHON))

.PHONY: all build demo test unit pytest pip-test asan fuzz fuzz-smoke tsan bootstrap venv clean

all: build

bootstrap:
	scripts/bootstrap

$(BUILD)/Makefile: CMakeLists.txt
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo $(PYTHON_HINT)

build: $(BUILD)/Makefile
	cmake --build $(BUILD) -j $(JOBS)

# The project's Python test oracles and peers, pinned (tests/requirements.txt).
$(VENV)/.installed: tests/requirements.txt
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --disable-pip-version-check -r tests/requirements.txt
	touch $@

venv: $(VENV)/.installed

# The demo's Python step runs in the project's own environment: the test venv when `make venv`
# (or `make test`) made it, otherwise a small one holding numpy only (seconds, not torch's minutes).
DEMO_VENV ?= .venv-demo
DEMO_ENV = $(if $(wildcard $(VENV)/.installed),$(VENV),$(DEMO_VENV))
$(DEMO_VENV)/.installed: tests/requirements.txt
	$(PYTHON) -m venv $(DEMO_VENV)
	$(DEMO_VENV)/bin/pip install --quiet --disable-pip-version-check $$(grep '^numpy==' tests/requirements.txt)
	touch $@

demo: bootstrap build $(DEMO_ENV)/.installed
	scripts/demo $(BUILD)/slidepipe demo-out $(DEMO_ENV)/bin/python

unit: build
	cd $(BUILD) && ctest -j 3 --output-on-failure

pytest: build venv
	SLIDEPIPE_BIN=$(abspath $(BUILD))/slidepipe $(VENV)/bin/python -m pytest -q -n 3 --dist loadfile tests --ignore=tests/pip
	SLIDEPIPE_BIN=$(abspath $(BUILD))/slidepipe $(VENV)/bin/python -m pytest -q -n 2 --dist loadfile python/tests

# `pip install .` and `pip install -e .` into new environments, each running python/tests
# (tests/pip; make test runs it too).
pip-test: venv
	$(VENV)/bin/python -m pytest -q -rs tests/pip

$(ASAN_BUILD)/Makefile: CMakeLists.txt
	CC=clang cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DSLIDEPIPE_SANITIZE=ON -DSLIDEPIPE_CUDA=OFF $(PYTHON_HINT)

asan: $(ASAN_BUILD)/Makefile
	cmake --build $(ASAN_BUILD) -j $(JOBS)

$(FUZZ_BUILD)/Makefile: CMakeLists.txt
	CC=clang cmake -S . -B $(FUZZ_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSLIDEPIPE_SANITIZE=ON -DSLIDEPIPE_FUZZ=ON -DSLIDEPIPE_CUDA=OFF

fuzz: $(FUZZ_BUILD)/Makefile
	cmake --build $(FUZZ_BUILD) -j $(JOBS)

$(TSAN_BUILD)/Makefile: CMakeLists.txt
	CC=clang cmake -S . -B $(TSAN_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSLIDEPIPE_TSAN=ON -DSLIDEPIPE_CUDA=OFF

# Only the concurrency tests: the tile cache, batched reads, shared-handle reads (about a minute).
tsan: $(TSAN_BUILD)/Makefile
	cmake --build $(TSAN_BUILD) -j $(JOBS) --target $(TSAN_TESTS)

# Each fuzz target for a short, bounded time from its seed corpus (CI runs this).
fuzz-smoke: fuzz
	scripts/fuzz-smoke $(FUZZ_BUILD) $(FUZZ_SECONDS)

# The sanitizer and fuzz builds leave the CUDA backend out: its runtime and nvcc's objects do not
# mix with clang's instrumentation, and CI has no GPU to run it on. The release build has it.

# Everything: unit tests, the real-data and CLI suites, the same under ASan+UBSan, fuzz smoke.
test: bootstrap build venv asan fuzz tsan
	scripts/run-tests $(BUILD) $(ASAN_BUILD) $(FUZZ_BUILD) $(VENV) $(FUZZ_SECONDS) $(TSAN_BUILD) "$(TSAN_TESTS)"

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(FUZZ_BUILD) $(TSAN_BUILD) build-pip demo-out
