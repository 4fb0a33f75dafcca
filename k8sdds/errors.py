"""Errors that reach the user as one clear message (never a traceback)."""


class UserError(Exception):
    """A mistake in what the user asked for; the CLI prints it and exits with `exit_code`."""

    exit_code = 2


class ScheduleError(UserError):
    """The schedule is not valid; names file, row, column, value and what is allowed."""


class DeploymentError(UserError):
    """A backend could not deploy, start or inspect the roles of a repeat: that repeat fails
    with this reason and the run goes on (raised by the backends, caught by the runner)."""

    exit_code = 1


class TestbedError(DeploymentError):
    """The emulated testbed could not be built, changed or inspected."""

    __test__ = False  # not a pytest test class


class KubernetesError(DeploymentError):
    """A call to the Kubernetes API failed; the message says what was attempted."""


class SshError(DeploymentError):
    """A host of the ssh backend could not be reached or could not run a role."""


class RunDirError(UserError):
    """A run directory (manifest, results, logs) cannot be read or is not one k8sdds
    knows; names the file and what is wrong."""


class EngineUnavailable(UserError):
    """A measuring program the schedule needs is not installed here."""

    exit_code = 1


class RunStopped(UserError):
    """The run could not go on (disk full, output unwritable); what finished is kept and the
    run can be resumed."""

    exit_code = 1
