"""Controller runtime: generic building blocks (clocks, rate limiters, work queues).

Modules here are independent of the JobSet API; import them directly
(e.g. ``from controller.runtime.workqueue import WorkQueue``).
"""

from controller.runtime import lazyclient

# Before any module here imports kubernetes_asyncio: its transport only, not its ~1,700 generated
# classes (lazyclient explains).
lazyclient.install()
