"""Running the service's processes: ``conquian serve`` (``cli``) and its ``supervisor``, the
health ``probe`` of compose and Kubernetes, and ``gc_tuning`` of each long-running process
(``docs/deploy.md``).  Nothing is imported here, so that a probe starts fast.
"""
