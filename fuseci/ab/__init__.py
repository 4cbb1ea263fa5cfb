"""``fuseci ab``'s parts that need no GPU: the temporary git worktrees (:mod:`fuseci.ab.git`)
and the fingerprint that skips unchanged suites (:mod:`fuseci.ab.fingerprint`); measuring and
judging are :mod:`fuseci.api.ab`'s."""
