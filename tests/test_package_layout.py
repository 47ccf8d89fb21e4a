"""The package's shape: one home per public name, files a reader can take in one sitting,
every step of the paper in the file the README names, inner solvers as values, and the
fingerprint tool that shows a refactor changed no number."""

import ast
import collections
import pathlib
import re
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import optaug_jax as oj

ROOT = pathlib.Path(__file__).parent.parent
NAMESPACES = ("agents", "analysis", "benchmarks", "inner", "kernels", "lp", "plotting")


def test_every_public_name_has_one_home():
  homes = collections.defaultdict(list)
  for name in oj.__all__:
    if name not in NAMESPACES:
      homes[name].append("oj")
  for namespace in NAMESPACES:
    module = getattr(oj, namespace)
    for name in module.__all__:
      homes[name].append(f"oj.{namespace}")
      assert hasattr(module, name), (namespace, name)
  twice = {name: where for name, where in homes.items() if len(where) > 1}
  assert not twice, twice
  assert not hasattr(oj, "types")


# The modules of `optaug_jax/_src` over 400 lines, each at most this long: a file that grows
# past its line here, or a new long one, is a decision to make in review (split it, or
# raise its line here), not a drift.
LONG_MODULES = {
  "cmdp.py": 560,
  "estimates.py": 530,
  "inner/cutting_planes.py": 410,  # the I >= 2 solve: its loop, and its ending's loop of two
  "experiment/result_files.py": 520,
  "lp.py": 440,  # the occupancy LPs and the least-excess LP that says how infeasible thresholds are
  "outlook.py": 580,  # the measured separation on a log grid, its criteria, each phase's progress
  "planning.py": 590,
  "runner.py": 420,  # run_sharded's per-device function that never vmaps a group of one seed
}


def test_long_source_files_are_the_listed_ones():
  src = ROOT / "optaug_jax" / "_src"
  for path in sorted(src.rglob("*.py")):
    lines = path.read_text().count("\n")
    name = path.relative_to(src).as_posix()
    assert lines <= LONG_MODULES.get(name, 400), (name, lines)


# Each step of the paper and the module that holds it (docs/algorithms.md, the table
# names the same files).
PAPER_STEPS = {
  "OptAug-CMDP (Algorithm 1)": ("agents/optaug.py", "optaug"),
  "Algorithm InnerOpt-FW": ("inner/frank_wolfe.py", "frank_wolfe"),
  "the exact inner solve, I = 1": ("inner/dual_search.py", "two_cut_search"),
  "the exact inner solve, I >= 2": ("inner/cutting_planes.py", "cutting_planes"),
  "the dual step, eq. (dual-step)": ("multiplier_updates.py", "dual_step"),
  "the optimistic model, eq. (opt-c)": ("estimates.py", "optimistic_model"),
  "extended backward induction, eq. (bw-ind)": ("planning.py", "extended_value_iteration"),
}


def test_the_api_page_is_generated_from_the_package():
  """docs/reference.md lists every public name (`python docs/make_api.py` writes it)."""
  out = subprocess.run(
    [sys.executable, str(ROOT / "docs" / "make_api.py"), "--check"],
    capture_output=True,
    text=True,
    timeout=300,
  )
  assert out.returncode == 0, out.stderr
  page = (ROOT / "docs" / "reference.md").read_text()
  for name in oj.__all__:
    assert f"[`{name}`](#optaug_jax.{name})" in page or f"## `optaug_jax.{name}`" in page, name


def test_every_step_of_the_paper_has_its_module():
  for step, (name, function) in PAPER_STEPS.items():
    path = ROOT / "optaug_jax" / "_src" / name
    tree = ast.parse(path.read_text())
    defined = {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
    assert function in defined, (step, name, function)


# The functions of the package that take the sparse layout (`next_states`) or the fill
# formulation (`fill`) as a parameter of their own, outside the value that carries both
# (`TransitionSet`): the bottom of the stack only. A new one means a caller threads what a
# `TransitionSet` already holds.
TAKE_NEXT_STATES = {
  "box.slot_states",  # a slot's index array, clamped for a gather
  "estimates.update_counts",  # the counts' layout (counts are not a set)
}
# ... and the layout's own host-side normalisers, whose subject is the index array itself.
# The box checks (`checking.kernels.transition_set` and its helpers) read the index array too: slots
# out of range, repeated, or empty with mass.
NORMALISE_NEXT_STATES = {
  "cmdp.merge_repeated_next_states",
  "arguments.repeated_next_state_row",
  "kernels._box",
  "kernels._box_faults",
  "kernels._repeated",
  "kernels._static_box",
  "kernels._row_detail",
}
TAKE_FILL = {
  "box.resolve_fill",  # the name's parser
  "optaug.optaug",  # the user's option of the two agents that plan with an extended DP
  "optdual.optdual",
  "estimates.OptimisticModel.transition_set",  # the confidence box with the user's fill
}


def _functions_taking(argument):
  """The library's functions with a parameter `argument`; the scripts' machinery
  (`_src/experiment/`) stands above the library and reaches it through its public names."""
  found = set()
  for path in sorted((ROOT / "optaug_jax").rglob("*.py")):
    if "experiment" in path.relative_to(ROOT / "optaug_jax").parts[:2]:
      continue
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
      for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.FunctionDef):
          child.parent = node  # type: ignore[attr-defined]
    for node in ast.walk(tree):
      if not isinstance(node, ast.FunctionDef):
        continue
      args = node.args
      if argument not in [a.arg for a in args.posonlyargs + args.args + args.kwonlyargs]:
        continue
      owner = getattr(node, "parent", None)
      name = f"{owner.name}.{node.name}" if isinstance(owner, ast.ClassDef) else node.name
      module = path.parent.name if path.stem == "__init__" else path.stem
      found.add(f"{module}.{name}")
  # The values that carry the layout and the fill: the set and its layouts.
  carriers = ("transition_set.TransitionSet.", "layouts.", "dense.Dense.", "sparse.Sparse.")
  return {f for f in found if not f.startswith(carriers)}


def test_only_the_bottom_of_the_stack_takes_the_layout_or_the_fill():
  assert _functions_taking("next_states") == TAKE_NEXT_STATES | NORMALISE_NEXT_STATES
  assert _functions_taking("fill") == TAKE_FILL
  assert len(TAKE_NEXT_STATES) <= 4 and len(TAKE_FILL) <= 4


# The modules that may test which layout an array is in (`next_states is None`, `.sparse`):
# the layouts themselves, the set that holds one, the checks of user arrays in the layout
# they come in, the CMDP container (its layout conversions), the setting (the support's
# declaration) and the benchmarks' constructors; and, in the estimates, the two host-side
# readers of the support's kind (sparse slots, a dense bool mask, or none), which set the
# counts' mask and count the observations off the support. Everywhere else a layout is a
# value whose methods do the work (`layouts.of(next_states)`).
# The layout is asked for only where it is defined (`layouts/`) and where a value is built
# in one: the constructors, with the checks they run on entry. Everything else reads the
# layout of a CMDP, a setting or a box as an object (`cmdp.layout`, `setting.layout`,
# `TransitionSet.layout`) and calls it.
LAYOUT_CONSTRUCTORS = (
  "layouts/",
  "transition_set.py",  # TransitionSet(lower, upper, next_states), TransitionSet.point
  "cmdp.py",  # CMDP, to_sparse, to_dense
  "cmdp_checks.py",  # validate_cmdp, the CMDP's check on entry
  "checking/",  # the TransitionSet's check on entry
  "setting.py",  # Setting(support=...) and bura2022's support read from a CMDP
  "benchmarks/",  # the registered CMDPs, each built in either layout
)
LAYOUT_CONSTRUCTOR_FUNCTIONS = {"estimates.py": {"init_counts"}}  # Counts in either layout
LAYOUT_NAMES = {"next_states", "ns_h", "ns", "off_support", "num_next_states"}
LAYOUT_TYPES = {"Dense", "Sparse"}


def _tests_the_layout(test):
  for node in ast.walk(test):
    if isinstance(node, ast.Attribute) and node.attr in ("sparse", "is_sparse"):
      return True
    if (
      isinstance(node, ast.Call)
      and getattr(node.func, "id", None) == "isinstance"
      and any(
        getattr(n, "id", getattr(n, "attr", None)) in LAYOUT_TYPES for n in ast.walk(node.args[1])
      )
    ):
      return True
    if isinstance(node, ast.Compare) and isinstance(node.ops[0], (ast.Is, ast.IsNot)):
      left = node.left
      name = left.attr if isinstance(left, ast.Attribute) else getattr(left, "id", None)
      if name in LAYOUT_NAMES:
        return True
  return False


def _layout_branches(source):
  """`(line, function)` of each `if` or conditional expression testing the layout; `None
  if x is None else f(x)` (an optional array mapped, one arm) is not a branch."""
  tree = ast.parse(source)
  found = []

  def visit(node, function):
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
      function = node.name if function is None else function
    passthrough = isinstance(node, ast.IfExp) and (
      isinstance(node.body, ast.Constant) and node.body.value is None
    )
    if isinstance(node, (ast.If, ast.IfExp)) and not passthrough and _tests_the_layout(node.test):
      found.append((node.lineno, function))
    for child in ast.iter_child_nodes(node):
      visit(child, function)

  visit(tree, None)
  return found


def test_no_layout_branch_outside_the_layouts():
  """Outside `layouts/` and the constructors no module asks which layout it is in: the
  recursions, the inner solvers, the agents, the estimates, the sampler and the LP call
  the layout object (`planning.py` holds each recursion once over the set's layout)."""
  src = ROOT / "optaug_jax" / "_src"
  found = []
  for path in sorted(src.rglob("*.py")):
    name = path.relative_to(src).as_posix()
    if name.startswith(LAYOUT_CONSTRUCTORS):
      continue
    allowed = LAYOUT_CONSTRUCTOR_FUNCTIONS.get(name, set())
    found += [
      f"{name}:{line} ({fn})"
      for line, fn in _layout_branches(path.read_text())
      if fn not in allowed
    ]
  assert not found, found
  # The detector finds what it is for.
  assert _layout_branches("def f(ns_h):\n  if ns_h is None:\n    return 0\n") == [(2, "f")]
  assert _layout_branches("def f(s):\n  return 1 if s.sparse else 2\n") == [(2, "f")]
  assert _layout_branches("def f(x):\n  return None if x.next_states is None else 1\n") == []
  assert _layout_branches("def f(c):\n  if c.is_sparse:\n    return 0\n") == [(2, "f")]
  assert _layout_branches("def f(c):\n  if c.off_support is not None:\n    return 0\n") == [
    (2, "f")
  ]
  assert _layout_branches("def f(l):\n  if isinstance(l, layouts.Sparse):\n    return 0\n") == [
    (2, "f")
  ]


def test_no_module_reads_another_modules_private_names():
  """`module._name` across the package's own modules (the refactor's rule)."""
  src = ROOT / "optaug_jax" / "_src"
  modules = {p.stem for p in src.rglob("*.py")} | {"inner", "agents"}
  namedtuple_api = {"replace", "fields", "asdict", "make", "field_defaults"}
  found = []
  for path in sorted((ROOT / "optaug_jax").rglob("*.py")):
    for line in path.read_text().splitlines():
      code = line.split("#")[0]
      for module, name in re.findall(r"\b(\w+)\._(\w+)", code):
        if module in modules and not name.startswith("_") and name not in namedtuple_api:
          found.append(f"{path.relative_to(ROOT)}: {module}._{name}")
  assert not found, found


def test_inner_solvers_are_hashable_values_checked_when_built():
  assert oj.inner.exact() == oj.inner.exact(num_iters=None, tol=0.0)
  assert hash(oj.inner.frank_wolfe()) == hash(oj.inner.frank_wolfe(100, "linesearch", None))
  assert oj.inner.exact(tol=None) != oj.inner.exact()
  assert "FrankWolfe(num_iters=7" in repr(oj.inner.frank_wolfe(num_iters=7))
  with pytest.raises(ValueError, match="step_rule: expected one of"):
    oj.inner.frank_wolfe(step_rule="armijo")
  with pytest.raises(ValueError, match="num_iters: must be an integer"):
    oj.inner.frank_wolfe(num_iters=2.5)
  with pytest.raises(ValueError, match="tol: must be >= 0"):
    oj.inner.exact(tol=-1e-3)
  with pytest.raises(ValueError, match="inner: expected an inner solver"):
    oj.optaug(
      num_episodes=10,
      safe_policy=jnp.full((2, 2, 2), 0.5),
      pretrain_episodes=1,
      eta=1.0,
      inner="dual",
    )
  with pytest.raises(ValueError, match="problem: expected an InnerProblem"):
    oj.solve_inner((1, 2, 3), jnp.zeros(1), 1.0)


def test_one_default_solver_everywhere():
  """The agents, `solve_inner` and the analysis functions default to the same value."""
  import inspect

  default = oj.inner.exact()
  for fn, arg in (
    (oj.optaug, "inner"),
    (oj.solve_inner, "solver"),
    (oj.analysis.alm_known_model, "inner"),
    (oj.analysis.optimal_value_estimate, "inner"),
    (oj.analysis.inner_sensitivities, "solver"),
  ):
    assert inspect.signature(fn).parameters[arg].default == default, fn.__name__


@pytest.mark.parametrize(
  "name, method",
  [
    ("extended_lmo", "lmo"),
    ("extended_value_iteration", "value_iteration"),
    ("occupancy", "occupancy"),
  ],
)
def test_a_second_door_is_deprecated_and_still_answers(name, method):
  """One door per operation: the box's operations are `TransitionSet` methods; the free
  functions warn, are off the listed surface, and give the method's numbers."""
  assert name not in oj.__all__ and hasattr(oj.TransitionSet, method)
  with pytest.warns(DeprecationWarning, match=f"oj.{name} is deprecated and goes in 0.3.0"):
    fn = getattr(oj, name)
  box = oj.TransitionSet(jnp.full((2, 3, 2, 3), 0.2), jnp.full((2, 3, 2, 3), 0.5))
  point = oj.TransitionSet.point(jnp.full((2, 3, 2, 3), 1.0 / 3.0))
  reward = jnp.arange(12.0).reshape(2, 3, 2) / 12.0
  if name == "occupancy":
    policy = jnp.full((2, 3, 2), 0.5)
    np.testing.assert_array_equal(fn(point, policy, 0), point.occupancy(policy, 0))
  else:
    want = getattr(box, method)(reward, 0)
    jax.tree.map(np.testing.assert_array_equal, fn(reward, box, 0), want)
  with pytest.raises(AttributeError, match="no attribute 'no_such_name'"):
    oj.no_such_name  # noqa: B018


@pytest.mark.parametrize(
  "name, method",
  [("optimal_policy", "optimal_policy"), ("optimistic_policy_evaluation", "evaluate")],
)
def test_a_second_door_in_kernels_is_deprecated_and_still_answers(name, method):
  assert name not in oj.kernels.__all__ and hasattr(oj.TransitionSet, method)
  with pytest.warns(DeprecationWarning, match=f"oj.kernels.{name} is deprecated and goes in 0.3"):
    fn = getattr(oj.kernels, name)
  box = oj.TransitionSet(jnp.full((2, 3, 2, 3), 0.2), jnp.full((2, 3, 2, 3), 0.5))
  reward = jnp.arange(12.0).reshape(2, 3, 2) / 12.0
  if name == "optimal_policy":  # of a known kernel
    point = oj.TransitionSet.point(jnp.full((2, 3, 2, 3), 1.0 / 3.0))
    np.testing.assert_array_equal(fn(reward, point), point.optimal_policy(reward))
  else:
    policy = jnp.full((2, 3, 2), 0.5)
    want = box.evaluate(reward, policy)
    jax.tree.map(np.testing.assert_array_equal, fn(reward, policy, box), want)
  with pytest.raises(AttributeError, match="no attribute 'no_such_name'"):
    oj.kernels.no_such_name  # noqa: B018


def test_composed_agent_states_read_through_and_write_through():
  state = oj.agents.init_state(jnp.ones(1), 0, num_states=2, num_actions=2, horizon=2)
  composed = oj.agents.PrimalDualState(agent=state, policy=jnp.zeros((2, 2, 2)))
  assert composed.multipliers is state.multipliers and composed.counts is state.counts
  changed = composed._replace(multipliers=jnp.full(1, 3.0))
  assert float(changed.agent.multipliers[0]) == 3.0 and changed.policy is composed.policy
  with pytest.warns(DeprecationWarning, match="replace_agent_state is deprecated"):
    again = oj.agents.replace_agent_state(composed, multipliers=jnp.full(1, 3.0))
  assert float(again.agent.multipliers[0]) == 3.0
  leaves = jax.tree.leaves(composed)
  assert len(leaves) == len(jax.tree.leaves(state)) + 1
  rebuilt = jax.jit(lambda s: s)(composed)
  assert isinstance(rebuilt, oj.agents.PrimalDualState) and int(rebuilt.episode) == 0


def test_fingerprint_compare_finds_one_ulp_and_maps_renamed_fields(tmp_path):
  """The refactor check can fail: a one-ulp change, a missing array and a shape change are
  each reported; the fields renamed by the refactor compare under their new names."""

  def compare(before, after):  # the script's exit status (it is run, never imported)
    script = ROOT / "experiments" / "fingerprint.py"
    command = [sys.executable, str(script), "--compare", str(before), str(after)]
    return subprocess.run(command, capture_output=True, text=True).returncode

  x = np.linspace(0.0, 1.0, 7)
  before = {
    "float64/p/optaug/log.fw_gap": x,
    "float64/p/optdual/state.multipliers": x,
    "float64/p/inner0/exact.fw_gap": x,
  }
  after = {
    "float64/p/optaug/log.inner_gap": x,
    "float64/p/optdual/state.agent.multipliers": x,
    "float64/p/inner0/exact.gap": x,
  }
  np.savez(tmp_path / "a.npz", **before)
  np.savez(tmp_path / "b.npz", **after)
  assert compare(tmp_path / "a.npz", tmp_path / "b.npz") == 0
  bumped = dict(after)
  bumped["float64/p/inner0/exact.gap"] = np.nextafter(x, 2.0)
  np.savez(tmp_path / "c.npz", **bumped)
  assert compare(tmp_path / "a.npz", tmp_path / "c.npz") == 1
  np.savez(tmp_path / "d.npz", **{k: v for k, v in after.items() if "optdual" not in k})
  assert compare(tmp_path / "a.npz", tmp_path / "d.npz") == 1
  reshaped = dict(after)
  reshaped["float64/p/optaug/log.inner_gap"] = x[None]
  np.savez(tmp_path / "e.npz", **reshaped)
  assert compare(tmp_path / "a.npz", tmp_path / "e.npz") == 1


def test_compiled_programs_compare_ignores_the_source_and_finds_an_operation(tmp_path):
  """`experiments/compiled_programs.py --compare`: programs that differ only in what names
  the source (metadata, the file and function tables, the instructions' numbering, which
  XLA derives from op names) are the same; another operation, another operand, or a
  missing program, is reported (exit status 1)."""

  def compare(before, after):  # the script's exit status (it is run, never imported)
    script = ROOT / "experiments" / "compiled_programs.py"
    command = [sys.executable, str(script), "--compare", str(before), str(after)]
    return subprocess.run(command, capture_output=True, text=True).returncode

  def program(op, source, n=1, operand=None):
    operand = operand or f"%s.{n}"
    return (
      "HloModule jit_f\n\nFileNames\n"
      f'1 "{source}/planning.py"\n\nFunctionNames\n1 "step"\n\n'
      "ENTRY %main (x: f32[3], y: f32[3]) -> f32[3] {\n"
      f"  %s.{n} = f32[3] sine(%x)\n"
      f'  ROOT %r = f32[3] {op}({operand}, %x), metadata={{op_name="jit(f)/{source}"}}'
      ", stack_frame_id=1\n}\n"
    )

  folders = {}
  for name, text in (
    ("a", program("add", "/x")),
    ("b", program("add", "/y", n=7)),
    ("c", program("multiply", "/x")),
    ("d", program("add", "/x", operand="%y")),
  ):
    folders[name] = tmp_path / name
    folders[name].mkdir()
    (folders[name] / "lmo.txt").write_text(text)
  assert compare(folders["a"], folders["b"]) == 0
  assert compare(folders["a"], folders["c"]) == 1
  assert compare(folders["a"], folders["d"]) == 1
  (folders["a"] / "vertex.txt").write_text(program("add", "/x"))
  assert compare(folders["a"], folders["b"]) == 1  # missing after


def _runtime_imports() -> dict[str, set[str]]:
  """`{module: the package modules it imports when it runs}`: the modules of
  `optaug_jax/_src` by their names below it, the face and its namespaces as `optaug_jax`
  and `optaug_jax.NAME`; relative and absolute imports, at the top or inside functions
  (imports under `if TYPE_CHECKING:` are for the type checker only and left out)."""
  package_root = ROOT / "optaug_jax"
  src = package_root / "_src"
  names = {}  # node -> path
  for path in src.rglob("*.py"):
    parts = path.relative_to(src).with_suffix("").parts
    names[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
  for path in package_root.glob("*.py"):
    names["optaug_jax" if path.stem == "__init__" else f"optaug_jax.{path.stem}"] = path

  def node_of(dotted: str) -> str | None:
    """The node of an absolute module name (None outside the package)."""
    if dotted.startswith("optaug_jax._src."):
      short = dotted[len("optaug_jax._src.") :]
      while short and short not in names:
        short = short.rpartition(".")[0]
      return short or None
    if dotted == "optaug_jax" or dotted.startswith("optaug_jax."):
      face = ".".join(dotted.split(".")[:2])
      return face if face in names else "optaug_jax"
    return None

  graph: dict[str, set[str]] = {name: set() for name in names}
  for name, path in names.items():
    tree = ast.parse(path.read_text())
    hidden = {
      id(n)
      for node in ast.walk(tree)
      if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
      for n in ast.walk(node)
    }
    in_src = src in path.parents
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    for node in ast.walk(tree):
      if id(node) in hidden:
        continue
      targets: list[str | None] = []
      if isinstance(node, ast.Import):
        targets = [node_of(alias.name) for alias in node.names]
      elif isinstance(node, ast.ImportFrom) and node.level and in_src:
        base = package[: len(package) - (node.level - 1)] + ([node.module] if node.module else [])
        for alias in node.names:
          full = ".".join(base + [alias.name])
          targets.append(full if full in names else ".".join(base))
      elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
        for alias in node.names:
          targets.append(node_of(f"{node.module}.{alias.name}") or node_of(node.module))
      for target in targets:
        if target in names and target != name:
          graph[name].add(target)
  return graph


def _assert_no_circle(graph) -> None:
  """Fails naming the first circle of `graph` (`{node: the nodes it imports}`)."""
  done: set[str] = set()

  def visit(node, path):
    assert node not in path, " -> ".join(path[path.index(node) :] + [node])
    if node in done:
      return
    for target in graph.get(node, ()):
      visit(target, path + [node])
    done.add(node)

  for node in list(graph):
    visit(node, [])


def test_no_circle_among_the_modules():
  graph = _runtime_imports()
  assert graph["transition_set"] >= {"planning"} and "cmdp" in graph["runner"]  # it reads
  # Policies evaluated on a CMDP (`safest_policy`, `policy_values`) sit above the model and
  # the DPs, which import neither them nor each other.
  assert {"cmdp", "planning"} <= graph["policies"]
  assert not graph["cmdp"] & {"planning", "policies"} and "cmdp" not in graph["planning"]
  _assert_no_circle(graph)
  # The absolute imports are read: the face imports the library, and the scripts' machinery
  # imports the face without the face importing it back.
  assert "runner" in graph["optaug_jax"] and "optaug_jax" in graph["experiment.runs"]
  assert not any(m.startswith("experiment") for m in graph["optaug_jax"])


def test_no_import_runs_back_up_a_floor():
  """The package's floors (each subpackage of `_src`, each of its top-level modules, each
  module of the face) import one another without a circle: each stands above everything
  it imports. The checking layer (`checking/`) imports nothing of the package but
  `errors`; a domain's checks live beside its type (`cmdp_checks`, `inner.checks`,
  `run_checks`)."""
  graph = _runtime_imports()
  floor = lambda node: node if node.startswith("optaug_jax") else node.split(".")[0]
  floors: dict[str, set[str]] = collections.defaultdict(set)
  for module, targets in graph.items():
    floors[floor(module)] |= {floor(t) for t in targets} - {floor(module)}
  assert floors["checking"] == {"errors"}
  _assert_no_circle(floors)


def test_the_face_does_not_load_the_experiment_harness():
  """`import optaug_jax` loads the library alone: no module of the scripts' machinery
  (`optaug_jax.experiment`, argparse-driven runs, checkpoints, result directories); it is
  imported by name and then reachable as `optaug_jax.experiment`."""
  import subprocess
  import sys

  code = (
    "import sys, optaug_jax as oj\n"
    "print(sorted(m for m in sys.modules if 'experiment' in m and m.startswith('optaug_jax')))\n"
    "from optaug_jax import experiment\n"
    "print(oj.experiment is experiment, hasattr(experiment, 'headline'))\n"
  )
  out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
  lines = out.stdout.strip().splitlines()
  assert lines == ["[]", "True True"], out.stdout


def _labelled_plain_refusals() -> list[str]:
  """`raise ValueError(...)` sites in the library (not the scripts' machinery) whose
  message starts with a label, `name: ...`: each should be an `ArgumentError` naming it."""
  label = re.compile(r"^\{?[A-Za-z_][A-Za-z_0-9.]*\}?: ")
  found = []
  for path in sorted((ROOT / "optaug_jax" / "_src").rglob("*.py")):
    if "experiment" in path.parts:
      continue
    for node in ast.walk(ast.parse(path.read_text())):
      if not (isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call)):
        continue
      func, args = node.exc.func, node.exc.args
      if not (isinstance(func, ast.Name) and func.id == "ValueError" and args):
        continue
      text = ast.unparse(args[0]).lstrip("f").strip("'\"")
      if label.match(text):
        found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
  return found


def test_refusals_are_typed_and_the_scripts_read_the_type_not_the_message():
  """Every labelled refusal of the library is an `oj.ArgumentError` (a `ValueError`, its
  message unchanged) naming the refused argument in `field`; the scripts map that field to
  their flag, and a plain `ValueError` whose message merely starts with an argument's name
  gets no flag (no message is parsed)."""
  from optaug_jax._src.experiment import runs

  assert _labelled_plain_refusals() == []
  with pytest.raises(oj.ArgumentError) as refused:
    oj.optdual(num_episodes=0)
  assert refused.value.field == "num_episodes" and str(refused.value).startswith("num_episodes:")
  assert isinstance(refused.value, ValueError)
  with pytest.raises(oj.ArgumentError) as refused:
    oj.optaug(num_episodes=10, safe_policy=None, pretrain_episodes=-1, eta=1.0)
  assert refused.value.field == "pretrain_episodes"
  typed = runs._library_refused("ctx", oj.ArgumentError("pretrain_episodes", "anything"))
  assert "--pretrain" in str(typed)
  plain = runs._library_refused("ctx", ValueError("pretrain_episodes: bad"))
  assert "--pretrain" not in str(plain) and "the library refuses this run" in str(plain)


# Functions short enough to read at once (the anchors: optax has 10 over 80 lines, all in
# its line search; mctx 1; rlax and gymnax 0), docstrings included.
MAX_FUNCTION_LINES = 80
MAX_PARAMETERS = 10
# The public signatures over 10 parameters. Each parameter is a keyword that users, the
# scripts' flags (`experiment.agent_flags`) and the registry's option lists pass by name
# today; grouping them into a frozen value changes the public API, which needs a
# deprecation cycle (CHANGELOG) rather than a refactor. Not to grow.
WIDE_PUBLIC_SIGNATURES = {
  "outlook.outlook": 15,
  "optaug.optaug": 13,
  "runner.run_sharded": 12,
  "peers.opse": 12,
}


def _functions():
  """`(module.function, lines, parameters)` of every function of the package."""
  for path in sorted((ROOT / "optaug_jax").rglob("*.py")):
    for node in ast.walk(ast.parse(path.read_text())):
      if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        a = node.args
        names = [x.arg for x in a.posonlyargs + a.args + a.kwonlyargs]
        names += [x.arg for x in (a.vararg, a.kwarg) if x is not None]
        count = len([n for n in names if n not in ("self", "cls")])
        lines = node.end_lineno - node.lineno + 1  # type: ignore[operator]
        yield f"{path.stem}.{node.name}", lines, count


def test_no_function_is_over_80_lines():
  long = {name: lines for name, lines, _ in _functions() if lines > MAX_FUNCTION_LINES}
  assert long == {}


def test_no_parameter_list_over_10_but_the_listed_public_ones():
  wide = {name: count for name, _, count in _functions() if count > MAX_PARAMETERS}
  assert wide == WIDE_PUBLIC_SIGNATURES


def test_the_package_reports_the_changelogs_last_release():
  """`oj.__version__` is the installed distribution's and the CHANGELOG's newest release
  (Keep a Changelog: `## [X.Y.Z] - YYYY-MM-DD`, below `## [Unreleased]`)."""
  from importlib.metadata import version

  changelog = (ROOT / "CHANGELOG.md").read_text()
  released = re.findall(r"^## \[(\d+\.\d+\.\d+)\] - \d{4}-\d{2}-\d{2}$", changelog, re.M)
  assert released and released[0] == oj.__version__ == version("optaug-jax")
  assert re.search(r"^## \[Unreleased\]$", changelog, re.M)
  pyproject = (ROOT / "pyproject.toml").read_text()
  assert f'version = "{oj.__version__}"' in pyproject


# The bodies below the doors: the recursions, the kernels, the estimates and the inner
# solvers trust their inputs, which the public entries checked (`checking/`, the domain
# checks beside their types, the factories' option checks). A raise or a warning here
# would be a check that moved below its door.
BODIES = (
  "planning.py",
  "box.py",
  "estimates.py",
  "batching.py",
  "horizon.py",
  "env.py",
  "numerics.py",
  "inner/problem.py",
  "inner/cutting_planes.py",
  "inner/master.py",
  "inner/dual_search.py",
  "inner/dual_function.py",
  "inner/recovery.py",
  "inner/retrieve.py",
  "inner/line_search.py",
  "inner/loops.py",
  "linear/planning.py",
  "linear/ridge.py",
  "linear/roots.py",
)


def _raises_and_warnings(source: str) -> list[int]:
  return [
    node.lineno
    for node in ast.walk(ast.parse(source))
    if isinstance(node, ast.Raise)
    or (isinstance(node, ast.Call) and ast.unparse(node.func) in ("warnings.warn", "warn"))
  ]


def test_the_bodies_below_the_doors_raise_nothing():
  src = ROOT / "optaug_jax" / "_src"
  found = {name: _raises_and_warnings((src / name).read_text()) for name in BODIES}
  assert not {name: lines for name, lines in found.items() if lines}, found
  # The detector finds what it is for.
  assert _raises_and_warnings("def f(x):\n  if x:\n    raise ValueError(x)\n") == [3]
  assert _raises_and_warnings("import warnings\nwarnings.warn('w')\n") == [2]


# The scripts reach the library by its public names. The exceptions measure internals on
# purpose: the compiled programs of the kernels below the doors, and two probes that spy
# on an internal function while a public run calls it.
SCRIPTS_READING_INTERNALS = {
  "compiled_programs.py",  # the programs of `estimates`, `env` and `inner.retrieve`
  "perf/certificate_probe.py",  # spies on `inner.loops.iterate`
  "perf/seeds.py",  # spies on `memory.fitting`
}


def test_the_scripts_reach_the_library_by_its_public_names():
  experiments = ROOT / "experiments"
  found = set()
  for path in sorted(experiments.rglob("*.py")):
    for node in ast.walk(ast.parse(path.read_text())):
      names = []
      if isinstance(node, ast.ImportFrom) and node.module:
        names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
      elif isinstance(node, ast.Import):
        names = [a.name for a in node.names]
      if any(n.startswith("optaug_jax._src") for n in names):
        found.add(path.relative_to(experiments).as_posix())
  assert found == SCRIPTS_READING_INTERNALS
