"""The checkpoint's record's old home: `jaxppo.rundir.record` owns it now; this name is kept
for code that imports `jaxppo.run.record.RunRecord` (as the docs showed before 0.2)."""

from jaxppo.rundir.record import RunRecord

__all__ = ["RunRecord"]
