"""The chaos soak (``make soak``; a 60-second variant runs in CI as tests/e2e/test_soak.py).

Two controller replicas on the whole local control plane; a driver creates, suspends, resumes,
fails, scales and deletes JobSets with every volume scope and retention setting (Snapshot too: the
driver plays the snapshot controller) at a steady rate; meanwhile the leader is ``kill -9``ed at
random intervals and kube-apiserver is restarted once.
Invariants (``invariants.py``, pure) are checked continuously and at the end:

1. no duplicate Job or claim ever (the API server's audit log; live listings);
2. every claim that exists is desired by a live JobSet or retained by policy;
3. no claim deleted against its policy; claims that policy retains still exist at the end;
4. every JobSet reaches its terminal state or is gone;
5. no finalizer left on a deleted JobSet;
6. controller RSS bounded (the peak of each replica is reported);
7. no claim deleted by a Snapshot policy without a ready snapshot of exactly that claim, and a
   claim whose snapshot failed is kept.

Layout: ``model`` (the driver's records, audit entries), ``invariants`` (pure checks),
``scenarios`` (JobSet manifests and what the driver does with each), ``chaos`` (the replicas,
leader kills, the API server restart, RSS), ``engine`` (the run), ``report`` (summary, JSON).
"""
