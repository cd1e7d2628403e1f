"""bookied's configuration: bk_server.conf keys, syntax and defaults.

An existing bk_server.conf can be handed to ``bookied --conf`` unchanged:
key names, defaults and meanings follow Apache BookKeeper's Java bookie.
What lives where:

* :mod:`.schema` -- ``OPTIONS``, the one schema: an :class:`Option` per key
  (type, default, bounds, meaning) that drives parsing, validation,
  ``bookied --help`` and the bookied.conf(5) man page; ``SECTIONS``,
  ``IGNORED_KEYS`` (Java keys bookied accepts without supporting);
* :mod:`.properties` -- the generic Java ``.properties`` syntax (Commons
  Configuration 1.x): lines, continuations, escapes, list commas;
* :mod:`.loading` -- :func:`load_config` into a validated, frozen
  :class:`BookieConfig` (fallbacks, checks across keys, warnings), and
  :func:`validate_setting`, the check of one ``KEY=VALUE`` given anywhere
  else (``bkctl autorecovery run --set``; any other ``--set KEY=VALUE`` of
  bk_server.conf keys should go through it too);
* :mod:`.render` -- :func:`render_config`, a configuration back as text;
* :mod:`.addresses` -- the bookie id and the addresses to advertise and to
  listen on (advertisedAddress, listeningInterface, host names, DNS);
* :mod:`.errors` -- :class:`ConfigError`, the one error all of them raise.
"""

from __future__ import annotations

from .addresses import (
    Resolver,
    resolve_bookie_address,
    resolve_bookie_id,
    resolve_listen_host,
    validate_bookie_id,
)
from .errors import ConfigError
from .loading import BookieConfig, load_config, load_config_text, startup_warnings, validate_setting
from .properties import read_properties
from .render import render_config
from .schema import IGNORED_KEYS, OPTIONS, OPTIONS_BY_NAME, SECTIONS, Option, find_option

__all__ = [
    "BookieConfig",
    "ConfigError",
    "IGNORED_KEYS",
    "OPTIONS",
    "OPTIONS_BY_NAME",
    "Option",
    "Resolver",
    "SECTIONS",
    "find_option",
    "load_config",
    "load_config_text",
    "read_properties",
    "render_config",
    "resolve_bookie_address",
    "resolve_bookie_id",
    "resolve_listen_host",
    "startup_warnings",
    "validate_bookie_id",
    "validate_setting",
]
