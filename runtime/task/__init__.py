"""The task side: what runs inside a Spark task for one subtask of one epoch.

Flink's StreamTask, OperatorChain, operators, heap keyed state and timer service. Nothing
here touches the driver; a task gets its inputs and returns its outputs and acknowledgement.
"""
