"""`restoreproof config`: the effective configuration, every secret masked, and where it came from."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import urlsplit, urlunsplit

import typer
import yaml

from verification.config import CONFIG_ENV, SECRETS_DIR_ENV, Settings, load_settings
from verification.errors import RestoreproofError
from verification.exit_codes import ExitCode
from verification.redaction import MASK, Redactor
from verification.settings_env import applied_variables, locate_config


def _mask_url(value: str) -> str:
    """A URL's password masked however short it is (the Redactor leaves out values too short to tell)."""
    try:
        parts = urlsplit(value)
        password = parts.password
    except ValueError:
        return value
    if not password:
        return value
    host = parts.netloc.rsplit("@", 1)[1]
    return urlunsplit(parts._replace(netloc=f"{parts.username or ''}:{MASK}@{host}"))


def _masked(value: Any) -> Any:
    if isinstance(value, str):
        return _mask_url(value) if "://" in value and "@" in value else value
    if isinstance(value, dict):
        return {key: _masked(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_masked(item) for item in value]
    return value


def effective(settings: Settings) -> dict[str, Any]:
    """The settings as data: SecretStr fields as pydantic masks them, URL passwords and every other
    occurrence of a configured secret (a passphrase copied into server_options) as the Redactor does."""
    data = settings.model_dump(mode="json")
    data["results_url"] = settings.results_database_url  # the store in use, also when it is the default
    return Redactor(settings).data(_masked(data))


def config_command(
    ctx: typer.Context,
    config: Annotated[Path | None, typer.Option("--config", "-c", help="YAML configuration file.",
                                                envvar=CONFIG_ENV)] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON on stdout: the file, the variables and "
                                                         "the settings.")] = False,
) -> None:
    """Print the effective configuration (YAML on stdout), every secret masked, headed by the file read
    and the RESTOREPROOF_* variables that applied.

    The file is the first of: --config, RESTOREPROOF_CONFIG, $XDG_CONFIG_HOME/restoreproof/config.yaml
    (~/.config/...), /etc/restoreproof/config.yaml; none is the defaults and the environment.
    Exit 0, or 2 when the configuration is invalid (the message names the setting).
    """
    # By name: typer carries a Click of its own, whose ParameterSource is not click's.
    from_environment = getattr(ctx.get_parameter_source("config"), "name", None) == "ENVIRONMENT"
    given_by = CONFIG_ENV if from_environment else "--config"
    location = locate_config(config, given_by)
    try:
        settings = load_settings(config)
    except RestoreproofError as exc:
        typer.echo(f"restoreproof: {exc}", err=True)
        raise typer.Exit(ExitCode.ERROR) from None
    variables = applied_variables(Settings, os.environ)
    if as_json:
        typer.echo(json.dumps({"file": str(location.path) if location.path else None, "found_by": location.found_by,
                               "environment": variables, "settings": effective(settings)}, indent=2))
        raise typer.Exit(0)
    header = [f"# configuration file: {location.describe()}",
              f"# environment: {', '.join(variables) if variables else 'no RESTOREPROOF_* setting'}"]
    if secrets := os.environ.get(SECRETS_DIR_ENV):
        header.append(f"# secrets folder: {secrets}")
    typer.echo("\n".join(header) + "\n" + yaml.safe_dump(effective(settings), sort_keys=False), nl=False)
    raise typer.Exit(0)
