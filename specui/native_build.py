"""Compiling specui's native kernels (specui/native*.c) into one shared library per instruction set, once per machine.

The library is built with the system's C compiler (`$CC`, else `cc`) into specui's cache folder
(`specui.packaged.cache_root()/native`, else the system's temporary folder), named by a hash of the sources, the
header, the compiler and the flags, so an edit rebuilds it. Its units compile at once, a compiler process each,
then link: native.c's many tiles twice over, half of them each (-DSPECUI_PART=1 and 2), beside the other files.
On two cores of an AMD EPYC that is 9.5 s instead of 17-19 for the files one after another. The library is
written under a temporary name and renamed, so processes building at once never load half a file; a failed build
leaves nothing.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from specui.packaged import cache_root

HERE = Path(__file__).parent
SOURCE = HERE / "native.c"  # the products (rowgemm), compiled in two parts
ATTEND_SOURCE = HERE / "native_attend.c"  # attention over the KV cache
LAYER_SOURCE = HERE / "native_layer.c"  # the norm and rotary kernels, argmax, GGUF blocks found
POOL_SOURCE = HERE / "native_pool.c"  # the product threads
HEAD_SOURCE = HERE / "native_head.c"  # the drafters' rounds (EAGLE, a draft model) and the steps they share
ADAPTERS_SOURCE = HERE / "native_adapters.c"  # the early-exit and Medusa rounds
HEADERS = [HERE / "native.h", HERE / "native_chain.h"]  # included, not compiled (in the build's hash)
FLAGS = {"avx512": ["-mavx512f", "-mfma", "-mf16c", "-DSPECUI_AVX512"], "avx2": ["-mavx2", "-mfma", "-mf16c"]}
COMPILE_FLAGS = ["-O3", "-fPIC", "-pthread"]  # before an ISA's FLAGS (tools.build_ab builds with them too)
LINK_FLAGS = ["-shared", "-pthread"]
PARTS = 2  # native.c's units (its tiles shared between them)


def sources() -> list[Path]:
    """Every file compiled into the library, the headers last (included, not compiled)."""
    return [SOURCE, ATTEND_SOURCE, LAYER_SOURCE, POOL_SOURCE, HEAD_SOURCE, ADAPTERS_SOURCE, *HEADERS]


def units() -> list[tuple[Path, list[str]]]:
    """(file, its own flags) for each compiler process, the longest first."""
    return [*((SOURCE, [f"-DSPECUI_PART={part}"]) for part in range(1, PARTS + 1)),
            *((path, []) for path in sources()[1:-len(HEADERS)])]


def _libraries(isa: str) -> list[Path]:
    """Where the library for `isa` is kept, in the order sought: named by a digest of its sources and recipe."""
    compiler, jobs = os.environ.get("CC") or "cc", units()
    flags = [*COMPILE_FLAGS, *FLAGS[isa], *LINK_FLAGS]
    recipe = " ".join([compiler, *flags, *(f"{p.name} {' '.join(f)}" for p, f in jobs)])
    digest = hashlib.sha256(b"".join(p.read_bytes() for p in sources()) + recipe.encode()).hexdigest()[:16]
    return [folder / f"specui-native-{isa}-{digest}.so"
            for folder in (cache_root() / "native", Path(tempfile.gettempdir()) / "specui-native")]


def is_built(isa: str) -> bool:
    """Whether the library for `isa` is compiled already (loading it then takes no compiler)."""
    return any(target.is_file() for target in _libraries(isa))


def build(isa: str) -> Path:
    """The shared library for `isa` (a key of FLAGS), compiled unless the cache holds it. Raises OSError (no
    compiler, no writable folder) or subprocess.CalledProcessError (the compiler's message in its stderr)."""
    compiler = os.environ.get("CC") or "cc"
    if shutil.which(compiler) is None:
        raise OSError(f"no C compiler ({compiler!r}) on PATH")
    flags, jobs = [*COMPILE_FLAGS, *FLAGS[isa]], units()
    for target in _libraries(isa):
        folder = target.parent
        if target.is_file():
            return target
        try:
            folder.mkdir(parents=True, exist_ok=True)
            work = Path(tempfile.mkdtemp(prefix=".build-", dir=folder))
        except OSError:
            continue  # an unwritable cache: try the next folder
        try:
            objects = [work / f"{i}.o" for i in range(len(jobs))]
            with ThreadPoolExecutor(max_workers=len(objects)) as pool:  # each waits on its own compiler process
                done = [pool.submit(subprocess.run, [compiler, *flags, *own, "-c", str(path), "-o", str(obj)],
                                    check=True, capture_output=True, timeout=300)
                        for (path, own), obj in zip(jobs, objects)]
                for future in done:
                    future.result()  # the first failure raises, with the compiler's message
            subprocess.run([compiler, *LINK_FLAGS, *map(str, objects), "-o", str(work / "library.so")], check=True,
                           capture_output=True, timeout=300)
            os.replace(work / "library.so", target)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        return target
    raise OSError("no writable folder for the native build")
