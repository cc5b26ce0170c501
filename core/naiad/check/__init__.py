"""``naiad check``: every model of a repository read, auto-completed and validated as the server would
load it, without serving; each problem with its file, line, what is wrong and the fix.

:mod:`~naiad.check.checker` runs the server's own steps, :mod:`~naiad.check.problems` holds and prints
what they found, :mod:`~naiad.check.locate` finds the config line a problem is about, and
:mod:`~naiad.check.command` is the subcommand.
"""

from naiad.check.checker import RepositoryChecker, check_repositories
from naiad.check.problems import CheckReport, Problem

__all__ = ["CheckReport", "Problem", "RepositoryChecker", "check_repositories"]
