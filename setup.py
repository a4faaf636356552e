"""Build tilelab_torch._C.

A CUDAExtension when the installed torch was built with CUDA
(torch.version.cuda) and a CUDA toolkit is found (nvcc, via CUDA_HOME or PATH),
else a CppExtension with the CPU kernel only. Whether a GPU is visible does not
matter: a machine with nvcc and no GPU still compiles and links the CUDA
kernels. TILELAB_CPU_ONLY=1 forces the CPU-only build.

Build with `make build` (an in-place build_ext into a persistent build/
folder: ninja then recompiles only what changed) or `pip install
--no-build-isolation -e .` (build isolation would install a second, different
torch to build against). TORCH_CUDA_ARCH_LIST picks
the GPU architectures (e.g. "9.0"); unset and with no GPU visible,
cpp_extension compiles for every architecture it knows, which is slow.
TILELAB_PTXAS_VERBOSE=1 prints ptxas' register/spill report per kernel.

Hopper: the hopper kernel family (wgmma + TMA) needs the sm_90a target. A
plain "9.0" in TORCH_CUDA_ARCH_LIST is built as "9.0a" (its code runs on the
same GPUs, H100/H200, and nothing else can run sm_90 code either); set
TILELAB_NO_SM90A=1 to keep "9.0", which leaves the hopper rows out (kernels()
reports them compiled=False and the dispatcher uses the mma.sync kernels).
"""
import glob
import os

from setuptools import find_packages, setup
from torch.utils import cpp_extension

ROOT = os.path.dirname(os.path.abspath(__file__))


def _flag(name: str) -> bool:
    return os.environ.get(name, "0").lower() in ("1", "true", "yes", "on")


def _use_cuda() -> bool:
    if _flag("TILELAB_CPU_ONLY"):
        return False
    import torch

    return torch.version.cuda is not None and cpp_extension.CUDA_HOME is not None


def _arch_list_with_sm90a() -> bool:
    """Rewrite TORCH_CUDA_ARCH_LIST's "9.0" as "9.0a"; True if the build has sm_90a."""
    archs = os.environ.get("TORCH_CUDA_ARCH_LIST", "")
    tokens = archs.replace(";", " ").split()
    if not _flag("TILELAB_NO_SM90A"):
        upgraded = [("9.0a" + t[3:]) if t in ("9.0", "9.0+PTX") else t for t in tokens]
        if upgraded != tokens:
            print(f"tilelab: building TORCH_CUDA_ARCH_LIST={archs!r} with 9.0 as 9.0a (wgmma/TMA kernels); "
                  "TILELAB_NO_SM90A=1 keeps plain 9.0")
            tokens = upgraded
            os.environ["TORCH_CUDA_ARCH_LIST"] = ";".join(tokens)
    return any(t.startswith("9.0a") for t in tokens)


def _extension():
    rel = lambda pattern: sorted(os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, pattern)))
    sources = rel("csrc/*.cpp") + rel("csrc/cpu/*.cpp")
    cxx = ["-O3"]
    if _use_cuda():
        # One translation unit per kernel family (launch_<family>.cu): ninja
        # builds them in parallel; the host path and the chooser are C++.
        sources += rel("csrc/cuda/*.cpp") + rel("csrc/cuda/*.cu")
        nvcc = ["-O3", "-lineinfo", "--expt-relaxed-constexpr"]
        if _flag("TILELAB_PTXAS_VERBOSE"):
            nvcc.append("-Xptxas=-v")
        macros = [("TILELAB_WITH_CUDA", "1")]
        if _arch_list_with_sm90a():
            macros.append(("TILELAB_SM90A", "1"))  # families.h: the hopper family is compiled
        return cpp_extension.CUDAExtension(
            "tilelab_torch._C",
            sources,
            define_macros=macros,
            extra_compile_args={"cxx": cxx, "nvcc": nvcc},
        )
    return cpp_extension.CppExtension("tilelab_torch._C", sources, extra_compile_args={"cxx": cxx})


setup(
    name="tilelab_torch",
    version="0.1.0",
    packages=find_packages(include=["tilelab_torch", "tilelab_torch.*"]),
    ext_modules=[_extension()],
    cmdclass={"build_ext": cpp_extension.BuildExtension},
)
