# The two commands of the README:
#   make test    set up (torch if missing, test deps), build the extension, run the test suite
#   make bench   set up, build, and run the A/B benchmark against torch.matmul on whatever device is present
# `make build` is incremental: the objects live in build/ (ninja recompiles only
# the files that changed) and nothing runs when no source changed.
PYTHON ?= python3
# Build for Hopper unless told otherwise (unset, with no GPU visible, cpp_extension
# compiles for every architecture it knows, which is slow).
TORCH_CUDA_ARCH_LIST ?= 9.0
export TORCH_CUDA_ARCH_LIST
# The torch installed when none is: a CUDA 13 build, matching nvcc 13.
TORCH_SPEC ?= torch==2.11.0

EXT := tilelab_torch/_C$(shell $(PYTHON) -c "import sysconfig; print(sysconfig.get_config_var('EXT_SUFFIX'))")
SOURCES := setup.py $(shell find csrc -name '*.cpp' -o -name '*.cu' -o -name '*.h' -o -name '*.cuh')
SETUP_STAMP := build/.setup-$(notdir $(PYTHON))

.PHONY: setup build test bench clean

setup: $(SETUP_STAMP)
$(SETUP_STAMP): requirements-dev.txt
	$(PYTHON) -c "import torch" 2>/dev/null || $(PYTHON) -m pip install "$(TORCH_SPEC)"
	$(PYTHON) -m pip install -q -r requirements-dev.txt
	@mkdir -p $(dir $@) && touch $@

build: $(EXT)
# The .so is stamped with the build's start time, so a source edited while ninja
# ran is still newer than it and the next make builds again.
$(EXT): $(SETUP_STAMP) $(SOURCES)
	@date +%s.%N >build/.build-start
	$(PYTHON) setup.py -q build_ext --inplace
	@touch -d @$$(cat build/.build-start) $@

# pytest exits 5 when it collected no tests: that is a failure here, not a pass.
test: build
	@$(PYTHON) -m pytest tests -q; rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no tests" >&2; exit 1; fi; exit $$rc

bench: build
	$(PYTHON) benchmarks/ab.py --out out/ab

clean:
	rm -rf build tilelab_torch/_C*.so
