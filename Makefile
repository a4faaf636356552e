# The two commands of the README:
#   make test    set up (torch if missing, test deps, build the extension) and run the test suite
#   make bench   set up and run the A/B benchmark against torch.matmul on whatever device is present
PYTHON ?= python3
# Build for Hopper unless told otherwise (unset, with no GPU visible, cpp_extension
# compiles for every architecture it knows, which is slow).
TORCH_CUDA_ARCH_LIST ?= 9.0
export TORCH_CUDA_ARCH_LIST
# The torch installed when none is: a CUDA 13 build, matching nvcc 13.
TORCH_SPEC ?= torch==2.11.0

.PHONY: setup build test bench

setup:
	$(PYTHON) -c "import torch" 2>/dev/null || $(PYTHON) -m pip install "$(TORCH_SPEC)"
	$(PYTHON) -m pip install -q -r requirements-dev.txt

build: setup
	$(PYTHON) -m pip install --no-build-isolation -e .

# pytest exits 5 when it collected no tests: that is a failure here, not a pass.
test: build
	@$(PYTHON) -m pytest tests -q; rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no tests" >&2; exit 1; fi; exit $$rc

bench: build
	$(PYTHON) benchmarks/ab.py --out out/ab
