"""`run_sharded(batch_size="auto")`: the batch chosen from a memory budget
(`optaug_jax._src.memory`), checked against the planned bytes XLA reports for each batch
size, and the run's numbers those of every seed at once."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import optaug_jax as oj
from optaug_jax._src import memory, runner

SEEDS = 16
EPISODES = 3


@pytest.fixture(scope="module")
def setup():
  bench = oj.benchmarks.random_family(seed=3, num_states=4, num_actions=3, horizon=4)
  agent = oj.agents.make_agent("optdual", bench, num_episodes=100)
  keys = jax.random.split(jax.random.PRNGKey(0), SEEDS)
  return bench, agent, keys


def _planned(agent, bench, keys, size):
  """(fixed, temporaries) of run_sharded's device program for `size` seeds at a time."""
  fn = runner._device_fn(agent, EPISODES, "full", False, size, False)
  args = ((keys, jnp.zeros(keys.shape[0])), None, (bench.cmdp,))
  return memory.planned_bytes(fn.lower(*args).compile())


def _chosen(monkeypatch, **kwargs):
  """run_sharded's result and the batch size `memory.fitting` chose."""
  seen = []
  fitting = memory.fitting

  def spy(*args):
    fn, size = fitting(*args)
    seen.append(size)
    return fn, size

  monkeypatch.setattr(memory, "fitting", spy)
  return oj.run_sharded(**kwargs, batch_size="auto"), seen[0]


def _same(a, b):
  return all(np.array_equal(x, y) for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)))


def test_the_batch_is_the_largest_power_of_two_that_fits(setup, monkeypatch):
  bench, agent, keys = setup
  planned = {s: _planned(agent, bench, keys, s) for s in (None, 2)}
  assert planned[None] is not None  # CPU reports its plan
  assert planned[2][0] == planned[None][0]  # states and logs: whatever the batch
  assert planned[2][1] < planned[None][1]  # temporaries: fewer seeds at a time, fewer
  run = dict(agent=agent, keys=keys, cmdp=bench.cmdp, num_episodes=EPISODES)
  # A budget that holds everything: every seed at once.
  ref, size = _chosen(monkeypatch, **run, memory_budget=sum(planned[None]))
  assert size is None
  # A budget that holds two seeds at a time and no more: 2 (any larger guess is compiled,
  # found too big and halved), and the same bits (one constraint: batch-invariant).
  out, size = _chosen(monkeypatch, **run, memory_budget=sum(planned[2]))
  assert size == 2 and _same(out, ref)


def test_a_budget_too_small_for_two_seeds_says_so(setup):
  bench, agent, keys = setup
  fixed, temp = _planned(agent, bench, keys, 2)
  with pytest.raises(ValueError, match=r"memory_budget: .* too small for 16 seeds .* states"):
    oj.run_sharded(
      agent,
      keys,
      bench.cmdp,
      num_episodes=EPISODES,
      batch_size="auto",
      memory_budget=fixed + temp - 1,
    )


def test_the_default_budget_is_part_of_the_memory_available():
  device = jax.devices()[0]
  budget = memory.default_budget(device)
  assert 0 < budget <= memory.available_memory()
  assert memory.size_text(3 * 2**30) == "3.00 GiB" and memory.size_text(2**21) == "2.0 MiB"


def test_batch_size_refuses_another_word(setup):
  bench, agent, keys = setup
  with pytest.raises((TypeError, ValueError), match="batch_size"):
    oj.run_sharded(agent, keys, bench.cmdp, num_episodes=EPISODES, batch_size="many")


def test_the_choice_is_made_once_per_program_and_budget(setup, monkeypatch):
  """perf/seeds.py: every chunk of a run re-traced its program to choose (`lower`), and a
  256-seed chunk of the 20x20 grid cost 1.8x the one chosen once."""
  bench, agent, keys = setup
  calls = []
  choose = memory._choose
  monkeypatch.setattr(memory, "_choose", lambda *a: calls.append(1) or choose(*a))
  run = dict(num_episodes=EPISODES, batch_size="auto", memory_budget=2**40)
  oj.run_sharded(agent, keys, bench.cmdp, **run)
  oj.run_sharded(agent, keys, bench.cmdp, **run)  # the next chunk of the same run
  assert len(calls) == 1
  oj.run_sharded(agent, keys, bench.cmdp, **{**run, "memory_budget": 2**41})
  assert len(calls) == 2  # another budget: chosen again
  # The default budget moves with the system's free memory: it is read once, when the
  # choice is made (the key is the budget as given), not at every chunk.
  free = iter(range(2**34, 2**35, 2**20))  # a little more free memory at every read
  monkeypatch.setattr(memory, "available_memory", lambda: next(free))
  for _ in range(2):
    oj.run_sharded(agent, keys, bench.cmdp, **{**run, "memory_budget": None})
  assert len(calls) == 3


def test_a_cap_bounds_the_batch_and_the_budget_still_holds(setup):
  """On CPU `auto` runs at most `CPU_BATCH` seeds at a time (`cap`); under a budget that
  holds two at a time and no more, the cap is halved down to 2."""
  bench, agent, keys = setup
  fn_for = lambda size: runner._device_fn(agent, EPISODES, "full", False, size, False)
  inputs = ((keys, jnp.zeros(keys.shape[0])), None, (bench.cmdp,))
  memory._CHOSEN.clear()
  assert memory.fitting(fn_for, inputs, SEEDS, 2**40, cap=4)[1] == 4
  assert memory.fitting(fn_for, inputs, SEEDS, 2**40, cap=SEEDS)[1] is None
  two = sum(_planned(agent, bench, keys, 2))
  assert memory.fitting(fn_for, inputs, SEEDS, two, cap=8)[1] == 2
  assert memory.CPU_BATCH == 16
