"""Every check of the package's inputs, in one place.

- `arguments`: host checks of user arguments (integers, reals, choices, policies, inner
  solvers) and the one test of whether a value is traced (`traced`); the messages name the
  argument and the fault (`position` writes an entry's index).
- `cmdps`: a CMDP's fields (`validate_cmdp`), the entry points' `check_cmdp`, the safe
  baseline's `baseline_fault`, the trace-time `assert_cmdp_shapes`.
- `kernels`: the kernels' arguments (a box, an initial state, finite arrays,
  distributions): on the host when concrete, through `checkify` when traced and asked
  (`check=True`, `checked`).
- `runs`: the runner's checks (the run's length, the key, a resumed state, the agent's
  assumptions against the true CMDP, the in-program checks of `run(check=True)`).
- `inner`: the inner solve's arguments (`solve_inner`).

The modules import nothing of each other's callers, so any module of the package may call
them; the package's `__init__` imports none of them.
"""
