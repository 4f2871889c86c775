"""Controller runtime: generic building blocks (clocks, rate limiters, work queues).

Modules here are independent of the JobSet API; import them directly
(e.g. ``from controller.runtime.workqueue import WorkQueue``).
"""
