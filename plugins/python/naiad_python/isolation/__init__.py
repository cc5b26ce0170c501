"""Python model instances in their own worker processes (the default; ``INSTANCE_ISOLATION: "thread"`` opts out).

The server side (:mod:`~naiad_python.isolation.instance`) is an ordinary model instance that forwards
each batch to a worker process (:mod:`~naiad_python.isolation.worker`), which runs the same
:class:`~naiad_python.instance.PythonModelInstance` as the in-process mode. Control messages are small
pickled dictionaries on a Unix socket pair (:mod:`~naiad_python.isolation.channel`); tensor bytes cross
in anonymous shared memory (:mod:`~naiad_python.isolation.arena`): ``memfd`` files that have no name in
``/dev/shm`` at all, so nothing is left behind by any exit, SIGKILL included.
"""
