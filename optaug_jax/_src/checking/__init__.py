"""The checking layer: checks of values that know nothing of the package's types, which
every module may call (it imports nothing of the package but `errors`).

- `arguments`: host checks of user arguments (integers, reals, choices, policies, inner
  solvers) and the one test of whether a value is traced (`traced`); the messages name the
  argument and the fault (`position` writes an entry's index).
- `kernels`: the kernels' arguments (a box, an initial state, finite arrays,
  distributions): on the host when concrete, through `checkify` when traced and asked
  (`check=True`, `checked`).

A domain's checks live beside its type: the CMDP's in `cmdp_checks.py`, the inner
problem's in `inner/checks.py`, the runner's (a run's length, the key, a resumed state, the
agent's assumptions against the true CMDP) in `run_checks.py`.
"""
