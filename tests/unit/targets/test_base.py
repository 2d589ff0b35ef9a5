"""The target interface: the generic lifecycle of a disposable server, no engine's knowledge."""
def test_the_target_interface_names_no_engines_fields():
    from verification.targets.base import Target

    # Where a server listens, its port, its data folder: the engine's to decide inside work_dir.
    # The exchange folder is a folder, not a socket or a port: what goes there is the engine's choice.
    assert set(Target.__annotations__) == {"kind", "name", "repo_path", "work_dir", "provision_seconds", "exchange"}
