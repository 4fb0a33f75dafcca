"""Errors that reach the user as one clear message (never a traceback)."""


class UserError(Exception):
    """A mistake in what the user asked for; the CLI prints it and exits with `exit_code`."""

    exit_code = 2


class ScheduleError(UserError):
    """The schedule is not valid; names file, row, column, value and what is allowed."""


class TestbedError(UserError):
    """The emulated testbed could not be built, changed or inspected."""

    exit_code = 1


class EngineUnavailable(UserError):
    """A measuring program the schedule needs is not installed here."""

    exit_code = 1


class RunStopped(UserError):
    """The run could not go on (disk full, output unwritable); what finished is kept and the
    run can be resumed."""

    exit_code = 1
