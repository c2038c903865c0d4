"""How a component reports bad input to Pulumi: a `RunError`, which the engine prints without a traceback, keeping
the `ConfigError` it reports (`tpuplane plan` prints that and exits with status 2)."""

import pulumi

from tpuplane.infra.errors import ConfigError


class InvalidInput(pulumi.RunError):
    """`what` (a stack config, an Args type) holds the problems of `error`."""

    def __init__(self, what: str, error: ConfigError) -> None:
        super().__init__(f"invalid {what}:\n{error}")
        self.error = error
