"""The package's typed refusal of an argument, at the bottom of the stack (it imports
nothing): callers that map a refused argument back to what set it (the scripts' flags) read
`ArgumentError.field` instead of parsing the message."""

from __future__ import annotations


class ArgumentError(ValueError):
  """A `ValueError` naming the refused argument.

  `ArgumentError(field, fault)` reads `"field: fault"`; with `where` (the entry point that
  checked it, e.g. `run`), `"where: field: fault"`. `field` is the parameter's name as the
  refusing function calls it (dotted for a field of a value: `setting.support`), or the
  entry itself where the fault is not one argument's.
  """

  def __init__(self, field: str, fault: str, *, where: str | None = None):
    super().__init__(f"{where}: {field}: {fault}" if where else f"{field}: {fault}")
    self.field = field
    self.fault = fault
    self.where = where
