"""The launcher's one error."""


class RedisLauncherError(RuntimeError):
    """No usable Redis binary, or a private server that would not start or stop."""
