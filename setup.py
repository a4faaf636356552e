"""Build tilelab_torch._C.

A CUDAExtension when the installed torch was built with CUDA
(torch.version.cuda) and a CUDA toolkit is found (nvcc, via CUDA_HOME or PATH),
else a CppExtension with the CPU kernel only. Whether a GPU is visible does not
matter: a machine with nvcc and no GPU still compiles and links the CUDA
kernels. TILELAB_CPU_ONLY=1 forces the CPU-only build.

Build with `pip install --no-build-isolation -e .`: build isolation would
install a second, different torch to build against. TORCH_CUDA_ARCH_LIST picks
the GPU architectures (e.g. "9.0"); unset and with no GPU visible,
cpp_extension compiles for every architecture it knows, which is slow.
TILELAB_PTXAS_VERBOSE=1 prints ptxas' register/spill report per kernel.
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


def _extension():
    rel = lambda pattern: sorted(os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, pattern)))
    sources = rel("csrc/*.cpp") + rel("csrc/cpu/*.cpp")
    cxx = ["-O3"]
    if _use_cuda():
        # One translation unit per kernel family: ninja builds them in parallel.
        sources += rel("csrc/cuda/*.cu")
        nvcc = ["-O3", "-lineinfo", "--expt-relaxed-constexpr"]
        if _flag("TILELAB_PTXAS_VERBOSE"):
            nvcc.append("-Xptxas=-v")
        return cpp_extension.CUDAExtension(
            "tilelab_torch._C",
            sources,
            define_macros=[("TILELAB_WITH_CUDA", "1")],
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
