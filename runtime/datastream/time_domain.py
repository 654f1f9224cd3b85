"""``pyflink.datastream.time_domain``: the module PyFlink jobs import ``TimeDomain`` from."""
from runtime.datastream.functions import TimeDomain

__all__ = ["TimeDomain"]
