"""The native crash of XLA:CPU's compiler, reproduced: a process at the kernel's limit on
memory mappings.

Linux lets a process hold `vm.max_map_count` memory mappings (65,530 by default). Every
XLA:CPU executable that stays loaded holds about 3 (its JIT code and data sections: 300
distinct small jits added 896), so a process that keeps about 20,000 executables loaded
reaches the limit. Past it, the next compilation (or the next load of an executable from
JAX's persistent compilation cache) fails inside LLVM ("LLVM compilation error: Cannot
allocate memory"), and the process then dies with a segmentation fault while jaxlib turns
that error into a Python exception (native stack: `__cxa_throw` -> `_Unwind_RaiseException`
-> `_Unwind_Find_FDE`, under `xla::ValueOrThrow<PyLoadedExecutable>`; Python frame
`jax/_src/compiler.py: backend_compile_and_load`, or `compilation_cache.py:
get_executable_and_time` for a cache hit), or aborts with "LLVM ERROR: Unable to allocate
section memory!". Seen with jax/jaxlib 0.10.2, Python 3.11, Linux 6.x, x86_64.

The test suite compiles thousands of programs per process; with its executables kept
loaded for a whole session a worker reached the limit (tests/conftest.py keeps it far below
now: see there). `jax.clear_caches()` releases the executables' mappings, and raising
`sysctl vm.max_map_count` moves the limit.

To get to the limit in seconds, this script first takes all but `--headroom` mappings with
one-page anonymous maps (which the kernel does not merge), then compiles distinct small
jitted functions, printing the map count as it goes:

  python -X faulthandler experiments/map_count_crash.py                 # crashes (SIGSEGV)
  python -X faulthandler experiments/map_count_crash.py --clear-every 50  # runs to the end
  gdb -batch -ex run -ex bt --args python experiments/map_count_crash.py  # the native stack
"""

from __future__ import annotations

import argparse
import mmap
import pathlib


def map_count() -> int:
  """Memory mappings of this process (lines of /proc/self/maps)."""
  with open("/proc/self/maps") as f:
    return sum(1 for _ in f)


def main(argv=None) -> None:
  p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  p.add_argument("--headroom", type=int, default=300, help="mappings left free before compiling")
  p.add_argument("--compiles", type=int, default=1000, help="distinct programs to compile")
  p.add_argument(
    "--clear-every", type=int, default=0, help="jax.clear_caches() every N compiles (0: never)"
  )
  args = p.parse_args(argv)
  limit = int(pathlib.Path("/proc/sys/vm/max_map_count").read_text())

  import jax
  import jax.numpy as jnp

  jnp.ones(3).block_until_ready()  # the runtime's own mappings first
  taken = []
  while map_count() < limit - args.headroom:
    taken.extend(mmap.mmap(-1, mmap.PAGESIZE) for _ in range(min(1000, limit // 100)))
    if map_count() > limit - args.headroom - 1000:
      while map_count() < limit - args.headroom:
        taken.append(mmap.mmap(-1, mmap.PAGESIZE))
  print(f"vm.max_map_count {limit}; {map_count()} mappings held before compiling", flush=True)
  for i in range(args.compiles):
    program = jax.jit(lambda x, i=i: jnp.sin(x) * i + 1.0)
    program(jnp.ones(i + 1)).block_until_ready()  # a new shape: a new executable
    if args.clear_every and (i + 1) % args.clear_every == 0:
      del program
      jax.clear_caches()
    if i % 20 == 0:
      print(f"compiled {i + 1}: {map_count()} mappings", flush=True)
  print(f"all {args.compiles} compiled; {map_count()} mappings", flush=True)


if __name__ == "__main__":
  main()
