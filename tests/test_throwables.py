"""Which failures a restart can cure (runtime.common.throwables) and the failure handler's
decision on each: a restored state whose type cannot migrate fails the run without a restart,
whatever the restart strategy; any other failure goes to the strategy."""
import time

from runtime.common.restart_strategy import RestartStrategies
from runtime.common.throwables import ThrowableType, is_unrecoverable, throwable_type
from runtime.execution.failure_handler import handle_failure
from runtime.execution.history import RUNNING, ExecutionHistory, ExecutionRecord
from runtime.execution.job_execution_result import JobExecutionException
from runtime.state.schema_evolution import StateMigrationException
from runtime.task.operators import UserCodeException


def user_failure(cause: BaseException) -> UserCodeException:
    """The failure a task reports when a user function raised ``cause``: named, then placed at
    the record's origin (a copy without ``__cause__``)."""
    try:
        raise cause
    except Exception as e:
        failure = UserCodeException("counts 1/2", ("a", 1), e, "trace")
    return failure.at("input.txt:3")


def test_a_state_migration_failure_is_unrecoverable_however_it_is_wrapped():
    refused = StateMigrationException("state 'last' ... cannot become ...")
    assert throwable_type(refused) is ThrowableType.NON_RECOVERABLE_ERROR
    assert is_unrecoverable(user_failure(refused))
    try:
        try:
            raise refused
        except StateMigrationException as e:
            raise RuntimeError("opening the operator failed") from e
    except RuntimeError as e:
        assert is_unrecoverable(e)
    assert not is_unrecoverable(user_failure(ValueError("bad record")))
    assert not is_unrecoverable(RuntimeError("a worker died"))
    assert not is_unrecoverable(None)
    # The driver's failure of the epoch carries what its tasks reported.
    assert is_unrecoverable(JobExecutionException("counts 1/2 failed ...", unrecoverable=True))
    assert not is_unrecoverable(JobExecutionException("counts 1/2 failed ..."))


def test_the_handler_restarts_a_recoverable_failure_and_not_an_unrecoverable_one(tmp_path):
    history = ExecutionHistory(str(tmp_path / "job"))
    execution = ExecutionRecord("run-1", "job", RUNNING, time.time(), dag_run_id="manual__1")
    strategy = RestartStrategies.fixed_delay_restart(3, 1000)
    now = time.time()
    recoverable = handle_failure(JobExecutionException("a worker died"), strategy, history, execution, now)
    assert (recoverable.restart, recoverable.backoff_ms, recoverable.unrecoverable) == (True, 1000, False)
    refused = handle_failure(JobExecutionException("state 'last' ...", unrecoverable=True), strategy, history,
                             execution, now)
    assert (refused.restart, refused.backoff_ms, refused.unrecoverable, refused.failures) == (False, 0, True, 1)
    assert refused.describe() == ("not restarting after failure 1: a restart would fail alike (a non-recoverable "
                                  "error); fix its cause, then start the job again")
