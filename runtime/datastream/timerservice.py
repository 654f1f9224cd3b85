"""``pyflink.datastream.timerservice``: the module PyFlink jobs import ``TimerService`` from."""
from runtime.datastream.functions import TimerService

__all__ = ["TimerService"]
