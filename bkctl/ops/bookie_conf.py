"""A bookie's bk_server.conf, read as bookied reads it (its own configuration schema): the
directories it names, its bookie id either way, the autorecovery keys checked.

The one module of ``bkctl/ops`` that reads bookied's configuration: what ``bkctl bookie
format``, ``bkctl upgrade``, ``bkctl cookie admin``, ``bkctl bookie inspect`` and ``bkctl
cluster autorecovery`` need of a bookie's configuration file
(tests/repo/test_domain_layer.py names the modules of bkctl that may import bookied).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from bkctl.wire.metadata.cookie import Cookie

from .errors import BadInput

if TYPE_CHECKING:
    from bkctl.wire.autorecovery.config import AutoRecoveryConfig

__all__ = ["BookieDirs", "bookie_dirs", "config_from_settings", "other_id_form"]


@dataclass(frozen=True)
class BookieDirs:
    """The directories a bk_server.conf names, and its bookie id (None: not resolvable here)."""

    bookie_id: str | None
    journal: tuple[str, ...]
    ledgers: tuple[str, ...]
    index: tuple[str, ...]  # only when indexDirectories is configured
    metadata_uri: str | None

    @property
    def all(self) -> list[str]:
        return list(dict.fromkeys(self.journal + self.ledgers + self.index))

    @property
    def known_id(self) -> str:
        """The bookie id, for what needs one (read with ``bookie_dirs(need_id=True)``)."""
        assert self.bookie_id is not None, "the bookie id is needed (bookie_dirs(need_id=True))"
        return self.bookie_id

    def cookie(self, instance_id: str | None) -> Cookie:
        return Cookie(self.known_id, self.journal, self.ledgers, instance_id, self.index or None)


def bookie_dirs(conf_path: str, need_id: bool = True) -> BookieDirs:
    """The directories a bk_server.conf names.  With ``need_id=False`` (reading files only) a
    bookie id that cannot be resolved on this host (another host's interface...) is None."""
    from bkctl.bookied.config import ConfigError, load_config, resolve_bookie_id

    cfg = load_config(conf_path)
    index = () if cfg.is_derived("indexDirectories") else tuple(cfg.index_directories)
    try:
        bookie_id = resolve_bookie_id(cfg)
    except ConfigError:
        if need_id:
            raise
        bookie_id = None
    return BookieDirs(
        bookie_id, tuple(cfg.journal_directories), tuple(cfg.ledger_directories), index, cfg.metadata_service_uri
    )


def other_id_form(conf_path: str, use_hostname: bool) -> tuple[str, str]:
    """``(old, new)`` bookie ids for switching a bookie to host-name (or IP) ids.

    As Java's ``updatecookie -bookieId``, the configuration must already ask
    for the new form (``useHostNameAsBookieID``); the old id is the same
    configuration resolved the other way.
    """
    from bkctl.bookied.config import ConfigError, load_config, resolve_bookie_id

    cfg = load_config(conf_path)
    wanted = "hostname" if use_hostname else "ip"
    if cfg.bookie_id is not None:
        raise BadInput(
            "the configuration sets bookieId explicitly; switching between host-name and IP "
            "ids does not apply (use --from-id OLD)",
        )
    if bool(cfg.use_host_name_as_bookie_id) != use_hostname:
        raise BadInput(
            f"set useHostNameAsBookieID={'true' if use_hostname else 'false'} in {conf_path} "
            f"first: the configuration must already use {wanted} ids",
        )
    try:
        new = resolve_bookie_id(cfg)
        old = resolve_bookie_id(cfg.with_overrides({"useHostNameAsBookieID": not use_hostname}))
    except ConfigError as e:
        raise BadInput(str(e)) from None
    return old, new


def config_from_settings(settings: dict[str, str]) -> AutoRecoveryConfig:
    """An :class:`AutoRecoveryConfig` from bk_server.conf keys (Java's names and
    units), each checked by bookied's schema as bookied checks it
    (:func:`bkctl.bookied.config.validate_setting`); ValueError (a ConfigError)
    with a one-line message names an unknown key or a bad value."""
    from bkctl.bookied.config import ConfigError, validate_setting
    from bkctl.wire.autorecovery.config import CONFIG_KEYS, config_from_keys

    values = {}
    for key, text in settings.items():
        if key not in CONFIG_KEYS:
            raise ConfigError(f"unknown autorecovery key {key!r} (one of {', '.join(sorted(CONFIG_KEYS))})", key=key)
        values[key] = validate_setting(key, text)
    return config_from_keys(values)
