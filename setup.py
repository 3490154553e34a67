"""Builds torch_tpu._C with CMake against the torch that is already installed.

Install with `pip install --no-build-isolation -e .`: an isolated build environment would pull
its own multi-GB torch. The build directory persists (build/), so rebuilds are incremental, and
ccache is used when it is on PATH.
"""
import os
import shutil
import subprocess
import sys
import sysconfig

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = os.path.dirname(os.path.abspath(__file__))
# The build imports torch, which would import an installed torch_tpu through its backend entry
# point: a stale or half-built extension would then stop its own rebuild.
os.environ["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"


class CMakeExtension(Extension):
    def __init__(self, name):
        super().__init__(name, sources=[])


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        import torch
        from torch.utils import cpp_extension

        build_dir = os.path.join(ROOT, "build")
        os.makedirs(build_dir, exist_ok=True)
        configure = [
            "cmake", "-S", ROOT, "-B", build_dir,
            "-DTORCH_INCLUDE_DIRS=" + ";".join(cpp_extension.include_paths()),
            "-DTORCH_LIBRARY_DIR=" + os.path.join(os.path.dirname(torch.__file__), "lib"),
            "-DTORCH_CXX11_ABI=" + str(int(torch._C._GLIBCXX_USE_CXX11_ABI)),
            "-DPYTHON_INCLUDE_DIR=" + sysconfig.get_paths()["include"],
        ]
        if shutil.which("ninja"):
            configure += ["-G", "Ninja"]
        if not os.path.exists(os.path.join(build_dir, "CMakeCache.txt")):
            subprocess.check_call(configure)
        # The table of PyTorch's C++ meta functions follows the installed torch's headers.
        subprocess.check_call([sys.executable, os.path.join(ROOT, "csrc", "aten", "gen_cpp_meta_table.py"),
                               cpp_extension.include_paths()[0], os.path.join(build_dir, "generated")])
        jobs = os.environ.get("TORCH_TPU_BUILD_JOBS", str(os.cpu_count() or 2))
        # Paths relative to the checkout, so ccache hits across clones (CI builds a fresh one).
        env = dict(os.environ, CCACHE_BASEDIR=ROOT, CCACHE_NOHASHDIR="1")
        subprocess.check_call(["cmake", "--build", build_dir, "--target", "_C", "core_tests", "-j", jobs], env=env)
        target = self.get_ext_fullpath(ext.name)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        # Replaced rather than rewritten in place: a process still running the old library keeps
        # its mapping intact instead of executing pages that changed under it.
        staged = target + ".new"
        shutil.copyfile(os.path.join(build_dir, "_C.so"), staged)
        os.replace(staged, target)


setup(
    ext_modules=[CMakeExtension("torch_tpu._C")],
    cmdclass={"build_ext": CMakeBuild},
)
