"""The target interface: the generic lifecycle of a disposable server, no engine's knowledge."""
def test_the_target_interface_names_no_engines_fields():
    from verification.targets.base import Target

    # Where a server listens, its port, its data folder: the engine's to decide inside work_dir.
    # The exchange folder is a folder, not a socket or a port: what goes there is the engine's choice.
    assert set(Target.__annotations__) == {"kind", "name", "repo_path", "work_dir", "provision_seconds", "exchange"}


def test_exit_137_is_a_timeout_only_once_the_budget_was_spent():
    from verification.targets.base import ExecResult

    # `timeout` kills with SIGKILL after its grace period: the budget was spent.
    assert ExecResult(["pg_amcheck"], 137, "", "", 70.0, budget=60.0).timed_out
    # The kernel's OOM killer (or anyone's SIGKILL) long before the budget: killed, not timed out.
    killed = ExecResult(["pg_amcheck"], 137, "", "", 3.0, budget=60.0)
    assert (killed.timed_out, killed.killed) == (False, True)
    # `timeout` stopped it with SIGTERM: a timeout whatever the time.
    assert ExecResult(["x"], 124, "", "", 1.0, budget=60.0).timed_out
    # A result with no budget known (as before): 137 is still taken as a timeout.
    assert ExecResult(["x"], 137, "", "", 1.0).timed_out
    assert not ExecResult(["x"], 1, "", "", 1.0, budget=60.0).killed


def test_not_started_is_only_the_runners_own_exit_codes() -> None:
    from verification.targets.base import not_started

    assert not_started("pg_amcheck", "timeout: failed to run command 'pg_amcheck': No such file\n", 127) == (
        "pg_amcheck was not found in the target (exit 127: timeout: failed to run command 'pg_amcheck': No such file)")
    assert not_started("x", "", 126) == "x is not executable in the target (exit 126: (nothing said))"
    assert not_started("x", "a\nlast words\n", 126) == "x is not executable in the target (exit 126: last words)"
    for ran in (0, 1, 2, 124, 125, 128, 137):
        assert not_started("x", "whatever", ran) is None
