"""The exceptions the steps raise that an orchestrator turns into its own failures (a task that
fails without a retry, with the message): one import for them, through ``runtime.jobmaster``."""
from runtime.checkpoint.checkpoint_record import CheckpointException
from runtime.jobmaster.steps import RunRequestError
from runtime.jobmaster.stop import StopRefusedException
from runtime.scheduler.slots import NoResourceAvailableException

__all__ = ["CheckpointException", "NoResourceAvailableException", "RunRequestError", "StopRefusedException"]
