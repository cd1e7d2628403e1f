"""Loading bk_server.conf into a validated :class:`BookieConfig`.

Unknown keys are logged as warnings on the ``bookied.config`` logger with
their file and line; so are keys that Java bookies know but bookied does not
support (``IGNORED_KEYS``), once per key, as having no effect.  In a
single-valued key an unescaped comma is an error (Java would silently use
the part before it); a list key repeated on several lines accumulates its
values; for a single-valued key repeated, the first value wins (as in Java)
and a warning is logged.  Settings that weaken durability
(``journalSyncData=false``, ``journalWriteData=false``) or that bookied
cannot honour (``journalAdaptiveGroupWrites=false``) are in
:func:`startup_warnings`, which bookied logs when it starts.
"""

from __future__ import annotations

import dataclasses
import difflib
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from bkctl.wire.metadata.layout import MetadataServiceURI

from .errors import ConfigError, InvalidValue, Origin, bad_value
from .properties import raw_properties, read_text, unescape
from .schema import IGNORED_KEYS, OPTIONS, OPTIONS_BY_NAME, find_option, number_text, parse_metadata_uri

__all__ = ["BookieConfig", "load_config", "load_config_text", "startup_warnings", "validate_setting"]

log = logging.getLogger("bookied.config")


@dataclass(frozen=True)
class _Setting:
    value: str | list[str]  # unescaped text, or elements for list keys
    shown: str  # as written, for error messages
    origin: Origin


@dataclass(frozen=True)
class BookieConfig:
    """A validated bookie configuration.

    Attributes are the snake_case forms of the Java keys (``bookie_port`` for
    ``bookiePort``) and hold effective values: options with a documented
    fallback (``journal_directories``, ``index_directories``,
    ``disk_usage_lwm_threshold``, the metadata trio) already carry it.
    ``cfg["bookiePort"]`` looks up by Java key.  Build instances with
    ``load_config`` or ``with_overrides``, not directly.
    """

    bookie_port: int
    allow_ephemeral_ports: bool
    bookie_id: str | None
    advertised_address: str | None
    listening_interface: str | None
    allow_loopback: bool
    use_host_name_as_bookie_id: bool
    use_short_host_name: bool
    max_adds_in_progress_limit: int
    max_reads_in_progress_limit: int
    netty_max_frame_size_bytes: int
    shutdown_timeout_ms: int
    http_server_enabled: bool
    http_server_port: int
    http_server_host: str
    prometheus_stats_http_enable: bool
    prometheus_stats_http_port: int
    prometheus_stats_http_address: str
    prometheus_stats_latency_rollover_seconds: int
    journal_directories: tuple[str, ...]
    journal_directory: str
    journal_sync_data: bool
    journal_write_data: bool
    journal_adaptive_group_writes: bool
    journal_max_group_wait_msec: int
    journal_buffered_writes_threshold: int
    journal_buffered_entries_threshold: int
    journal_flush_when_queue_empty: bool
    journal_recovery_add_group_wait_msec: int
    journal_max_size_mb: int
    journal_max_backups: int
    journal_pre_alloc_size_mb: int
    journal_zero_ahead_mb: int
    journal_remove_pages_from_cache: bool
    ledger_directories: tuple[str, ...]
    index_directories: tuple[str, ...]
    allow_storage_expansion: bool
    flush_interval: int
    db_storage_write_cache_max_size_mb: int
    db_storage_max_throttle_time_ms: int
    disk_usage_threshold: float
    disk_usage_warn_threshold: float
    disk_usage_lwm_threshold: float
    disk_check_interval: int
    min_usable_size_for_entry_log_creation: int
    min_usable_size_for_high_priority_writes: int
    read_only_mode_enabled: bool
    force_read_only_bookie: bool
    gc_wait_time: int
    minor_compaction_threshold: float
    minor_compaction_interval: int
    nearly_empty_compaction_threshold: float
    settled_compaction_threshold: float
    minor_compaction_max_time_millis: int
    major_compaction_threshold: float
    major_compaction_interval: int
    major_compaction_max_time_millis: int
    compaction_rate: int
    compaction_rate_by_entries: int
    compaction_rate_by_bytes: int
    is_throttle_by_bytes: bool
    compaction_max_outstanding_requests: int
    force_allow_compaction: bool
    is_force_gc_allow_when_no_space: bool
    verify_metadata_on_gc: bool
    gc_overreplicated_ledger_wait_time: int
    log_size_limit: int
    metadata_service_uri: str | None
    zk_servers: tuple[str, ...] | None
    zk_ledgers_root_path: str
    zk_timeout: int
    zk_enable_security: bool
    zk_digest_auth_path: str | None
    zk_sasl_mechanism: str | None
    zk_sasl_username: str | None
    zk_sasl_password_path: str | None
    zk_tls_enabled: bool
    zk_tls_ca_path: str | None
    zk_tls_certificate_path: str | None
    zk_tls_key_path: str | None
    auto_recovery_daemon_enabled: bool
    auto_recovery_daemon_cpu_priority: str
    lost_bookie_recovery_delay: int
    auditor_periodic_check_interval: int
    auditor_periodic_bookie_check_interval: int
    auditor_replicas_check_interval: int
    auditor_periodic_placement_policy_check_interval: int
    ensemble_placement_policy: str
    network_topology_script_file_name: str | None
    network_topology_script_number_args: int
    min_num_racks_per_write_quorum: int
    enforce_min_num_racks_per_write_quorum: bool
    open_ledger_rereplication_grace_period: int
    lock_release_of_failed_ledger_grace_period: int
    rereplication_entry_batch_size: int
    replication_rate_by_bytes: int
    tls_provider_factory_class: str | None
    tls_provider: str
    tls_key_store_type: str
    tls_key_store: str | None
    tls_key_store_password_path: str | None
    tls_certificate_path: str | None
    tls_trust_store_type: str
    tls_trust_store: str | None
    tls_trust_store_password_path: str | None
    tls_client_authentication: bool
    tls_cert_files_refresh_duration_seconds: int

    _settings: Mapping[str, _Setting] = field(default_factory=dict, compare=False, repr=False)
    _derived: frozenset[str] = field(default=frozenset(), compare=False, repr=False)

    # -- lookups -----------------------------------------------------------

    def __getitem__(self, key: str) -> Any:
        opt = find_option(key)
        if opt is None:
            raise KeyError(key)
        return getattr(self, opt.attr)

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and find_option(key) is not None

    def get(self, key: str, default: Any = None) -> Any:
        try:
            return self[key]
        except KeyError:
            return default

    def zk_security(self):
        """The :class:`~bkctl.wire.metadata.zksecurity.ZKSecurity` these keys describe
        (secrets read from their files); ConfigError when a file is unreadable."""
        from bkctl.wire.metadata.zksecurity import ZKSecurity

        def secret(key: str, path: str | None) -> str | None:
            if path is None:
                return None
            try:
                with open(path, encoding="utf-8") as f:
                    return f.read().strip()
            except OSError as exc:
                raise ConfigError(f"{key}: cannot read {path}: {exc.strerror or exc}") from None

        try:
            return ZKSecurity(
                digest=secret("zkDigestAuthPath", self.zk_digest_auth_path),
                sasl_mechanism=self.zk_sasl_mechanism,
                sasl_username=self.zk_sasl_username,
                sasl_password=secret("zkSaslPasswordPath", self.zk_sasl_password_path),
                tls=self.zk_tls_enabled,
                tls_ca=self.zk_tls_ca_path,
                tls_cert=self.zk_tls_certificate_path,
                tls_key=self.zk_tls_key_path,
                enable_security=self.zk_enable_security,
            )
        except ValueError as exc:
            raise ConfigError(str(exc)) from None

    def tls_files(self):
        """The bookie's TLS files (:class:`~bkctl.wire.tls.TLSFiles`), or None when TLS is off."""
        if not self.tls_provider_factory_class:
            return None
        from bkctl.wire.tls import TLSConfigError, TLSFiles

        pkcs12 = self.tls_key_store_type == "PKCS12"
        try:
            return TLSFiles(
                ca=self.tls_trust_store,
                cert=None if pkcs12 else self.tls_certificate_path,
                key=None if pkcs12 else self.tls_key_store,
                key_password_path=None if pkcs12 else self.tls_key_store_password_path,
                pkcs12=self.tls_key_store if pkcs12 else None,
                pkcs12_password_path=self.tls_key_store_password_path if pkcs12 else None,
                require_client_cert=self.tls_client_authentication,
            )
        except TLSConfigError as exc:
            raise ConfigError(str(exc)) from None

    def as_dict(self) -> dict[str, Any]:
        """``{java_key: value}`` for every option, in schema order."""
        return {opt.name: getattr(self, opt.attr) for opt in OPTIONS}

    def source_of(self, key: str) -> str | None:
        """``"path:line"``, ``"command line"``, or None for defaults and derived values."""
        opt = find_option(key)
        if opt is None:
            raise KeyError(key)
        setting = self._settings.get(opt.name)
        return str(setting.origin) if setting else None

    def origin_of(self, key: str) -> Origin | None:
        """Where the value was set (file line or command line); None for
        defaults and derived values.  ``key`` is a Java key."""
        setting = self._settings.get(key)
        return setting.origin if setting else None

    def is_derived(self, key: str) -> bool:
        """Whether the value was filled in from another key (a fallback)."""
        opt = find_option(key)
        if opt is None:
            raise KeyError(key)
        return opt.name in self._derived

    # -- derived views -----------------------------------------------------

    @property
    def metadata(self) -> MetadataServiceURI | None:
        """The parsed metadata service URI, or None when none is configured."""
        if self.metadata_service_uri is None:
            return None
        return MetadataServiceURI.parse(self.metadata_service_uri)

    @property
    def zk_connect_string(self) -> str | None:
        """ZooKeeper servers as ``host:port,host:port``, or None."""
        return ",".join(self.zk_servers) if self.zk_servers else None

    # -- changes -----------------------------------------------------------

    def with_overrides(self, overrides: Mapping[str, Any]) -> BookieConfig:
        """A new configuration with ``overrides`` applied on top, re-validated."""
        settings = dict(self._settings)
        settings.update(_settings_from_overrides(overrides))
        return _build(settings)


def _check_fields() -> None:
    names = [f.name for f in dataclasses.fields(BookieConfig) if not f.name.startswith("_")]
    expected = [opt.attr for opt in OPTIONS]
    if names != expected:  # pragma: no cover - guards edits to the schema
        raise AssertionError(f"BookieConfig fields {names} do not match OPTIONS {expected}")


_check_fields()


def load_config(path: str | os.PathLike[str] | None = None, overrides: Mapping[str, Any] | None = None) -> BookieConfig:
    """Read ``path`` (a bk_server.conf; None for defaults only), apply
    ``overrides`` and validate.

    ``overrides`` maps Java keys (``bookiePort``), attribute names or flag
    names (``--bookie-port``) to strings; list keys take a comma-separated
    string or a sequence, and already-typed values (int, bool...) are
    accepted too.  None values are skipped, so click results can be passed
    as they are.  Overrides replace file values, lists included.  Raises
    ``ConfigError``.
    """
    settings: dict[str, _Setting] = {}
    if path is not None:
        settings.update(_settings_from_text(read_text(path), os.fspath(path)))
    if overrides:
        settings.update(_settings_from_overrides(overrides))
    return _build(settings)


def load_config_text(
    text: str, overrides: Mapping[str, Any] | None = None, *, source: str = "<config>"
) -> BookieConfig:
    """Like ``load_config`` for bk_server.conf text held in memory; ``source``
    stands for the file name in messages."""
    settings = _settings_from_text(text, source)
    if overrides:
        settings.update(_settings_from_overrides(overrides))
    return _build(settings)


def validate_setting(key: str, value: str) -> Any:
    """The typed value of one bk_server.conf ``KEY=VALUE`` given outside a file
    (``bkctl autorecovery run --set``, and any other ``--set`` of bk_server.conf
    keys), checked by ``OPTIONS`` exactly as bookied checks the key in its file.

    ``key`` is the Java name; a list key's elements are separated by commas
    (as in ``load_config``'s overrides).  Raises :class:`ConfigError` with a
    one-line message (``minNumRacksPerWriteQuorum: '0' must be at least 1``)
    for an unknown key, a Java key bookied does not support, or a bad value;
    an empty value of a string or list key is None ("unset").  Checks across keys
    (``diskUsageWarnThreshold`` below ``diskUsageThreshold``...) are left to
    :func:`load_config`, which sees them all.
    """
    opt = OPTIONS_BY_NAME.get(key)
    if opt is None:
        if key in IGNORED_KEYS:
            raise ConfigError(f"{key} is a Java bookie setting that bookied does not support", key=key)
        raise ConfigError(f"unknown bk_server.conf key {key!r}{_suggest(key)}", key=key)
    try:
        return opt.convert(value.split(",") if opt.type == "list" else value)
    except InvalidValue as exc:
        raise bad_value(key, value, str(exc)) from None


def _warn_unsupported(origin: Origin, key: str) -> None:
    log.warning("%s: %s is a Java bookie setting that bookied does not support; it has no effect", origin, key)


def _settings_from_text(text: str, where: str) -> dict[str, _Setting]:
    settings: dict[str, _Setting] = {}
    unsupported: set[str] = set()
    for number, key, raw in raw_properties(text, where):
        origin = Origin(where, number)
        opt = OPTIONS_BY_NAME.get(key)
        if opt is None:
            if key in IGNORED_KEYS:
                if key not in unsupported:
                    unsupported.add(key)
                    _warn_unsupported(origin, key)
            elif not key:
                log.warning("%s: line without a key ignored", origin)
            elif key == "include":
                log.warning(
                    "%s: 'include' directives are not supported; %r not read",
                    origin,
                    "".join(unescape(raw, split=False)),
                )
            else:
                log.warning("%s: unknown key %r ignored%s", origin, key, _suggest(key))
            continue
        try:
            parts = unescape(raw, split=True)
        except InvalidValue as exc:
            raise bad_value(key, raw, str(exc), origin) from None
        if opt.type != "list" and len(parts) > 1:
            raise bad_value(
                key,
                raw,
                "contains an unescaped ',' (Java would read only "
                f"{parts[0].strip()!r}); write '\\,' for a literal comma",
                origin,
            )
        value: str | list[str] = parts if opt.type == "list" else parts[0]
        earlier = settings.get(key)
        if earlier is not None:
            if opt.type == "list":
                assert isinstance(earlier.value, list) and isinstance(value, list)
                settings[key] = _Setting(earlier.value + value, f"{earlier.shown},{raw}", earlier.origin)
            else:
                log.warning("%s: %s set again; the first value (%s) is used, as in Java", origin, key, earlier.origin)
            continue
        settings[key] = _Setting(value, raw, origin)
    return settings


def _suggest(key: str) -> str:
    names = list(OPTIONS_BY_NAME) + sorted(IGNORED_KEYS)
    for name in names:
        if name.lower() == key.lower():
            return f" (did you mean {name!r}? keys are case-sensitive)"
    close = difflib.get_close_matches(key, names, n=1, cutoff=0.8)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _settings_from_overrides(overrides: Mapping[str, Any]) -> dict[str, _Setting]:
    settings: dict[str, _Setting] = {}
    origin = Origin()
    for key, value in overrides.items():
        if value is None:
            continue
        opt = find_option(key)
        if opt is None:
            if key in IGNORED_KEYS:
                _warn_unsupported(origin, key)
                continue
            raise ConfigError(f"unknown configuration key {key!r}{_suggest(key)}", key=key)
        if isinstance(value, bool):
            shown = "true" if value else "false"
            text: str | list[str] = shown
        elif isinstance(value, (list, tuple)):
            text = [str(item) for item in value]
            shown = ",".join(text)
        else:
            shown = str(value)
            text = shown.split(",") if opt.type == "list" else shown
        settings[opt.name] = _Setting(text, shown, origin)
    return settings


def _build(settings: Mapping[str, _Setting]) -> BookieConfig:
    values: dict[str, Any] = {}
    explicit: set[str] = set()
    for opt in OPTIONS:
        setting = settings.get(opt.name)
        value = opt.default
        if setting is not None:
            try:
                converted = opt.convert(setting.value)
            except InvalidValue as exc:
                raise bad_value(opt.name, setting.shown, str(exc), setting.origin) from None
            if converted is not None:
                value = converted
                explicit.add(opt.name)
        values[opt.name] = value

    def origin(key: str) -> Origin | None:
        setting = settings.get(key)
        return setting.origin if setting is not None and key in explicit else None

    def shown(key: str) -> str:
        setting = settings.get(key)
        if setting is not None and key in explicit:
            return setting.shown
        return OPTIONS_BY_NAME[key].format_value(values[key])

    derived: set[str] = set()

    # Fallbacks Java applies when a key is unset.
    if "journalDirectories" not in explicit:
        values["journalDirectories"] = (values["journalDirectory"],)
        derived.add("journalDirectories")
    if "indexDirectories" not in explicit:
        values["indexDirectories"] = values["ledgerDirectories"]
        derived.add("indexDirectories")
    if "diskUsageLwmThreshold" not in explicit:
        values["diskUsageLwmThreshold"] = values["diskUsageThreshold"]
        derived.add("diskUsageLwmThreshold")
    if "compactionRateByEntries" not in explicit:
        values["compactionRateByEntries"] = values["compactionRate"]
        derived.add("compactionRateByEntries")
    if "minUsableSizeForHighPriorityWrites" not in explicit:
        values["minUsableSizeForHighPriorityWrites"] = values["minUsableSizeForEntryLogCreation"]
        derived.add("minUsableSizeForHighPriorityWrites")

    # Metadata service: the URI wins; otherwise derive it from the ZooKeeper keys.
    uri = values["metadataServiceUri"]
    if uri is not None:
        parsed = parse_metadata_uri(uri)  # already checked by the option
        for key, from_uri in (("zkServers", parsed.servers), ("zkLedgersRootPath", parsed.root)):
            if key in explicit and values[key] != from_uri:
                log.warning(
                    "%s: %s %r ignored: metadataServiceUri (%s) takes precedence",
                    origin(key),
                    key,
                    OPTIONS_BY_NAME[key].format_value(values[key]),
                    origin("metadataServiceUri"),
                )
            if key not in explicit or values[key] != from_uri:
                derived.add(key)
            values[key] = from_uri
    elif values["zkServers"] is not None:
        values["metadataServiceUri"] = str(
            MetadataServiceURI.for_servers(values["zkServers"], values["zkLedgersRootPath"])
        )
        derived.add("metadataServiceUri")

    # Checks across keys.
    if values["bookiePort"] == 0 and not values["allowEphemeralPorts"]:
        raise bad_value(
            "bookiePort",
            shown("bookiePort"),
            "asks for an ephemeral port; set allowEphemeralPorts=true if that is intended",
            origin("bookiePort"),
        )
    threshold = values["diskUsageThreshold"]
    for key in ("diskUsageWarnThreshold", "diskUsageLwmThreshold"):
        if values[key] <= threshold:
            continue
        if key in explicit:
            raise bad_value(key, shown(key), f"is above diskUsageThreshold ({number_text(threshold)})", origin(key))
        raise bad_value(
            "diskUsageThreshold",
            shown("diskUsageThreshold"),
            f"is below {key} ({number_text(values[key])}, its default)",
            origin("diskUsageThreshold"),
        )
    _check_compaction(values, shown, origin)
    if values["forceReadOnlyBookie"] and not values["readOnlyModeEnabled"]:
        raise bad_value(
            "forceReadOnlyBookie",
            shown("forceReadOnlyBookie"),
            "contradicts readOnlyModeEnabled=false: a forced read-only bookie needs read-only "
            "mode (Java refuses to start too)",
            origin("forceReadOnlyBookie"),
        )
    if (
        values["httpServerEnabled"]
        and values["httpServerPort"] != 0
        and values["httpServerPort"] == values["bookiePort"]
    ):
        raise bad_value(
            "httpServerPort", shown("httpServerPort"), "is the same port as bookiePort", origin("httpServerPort")
        )

    return BookieConfig(
        **{opt.attr: values[opt.name] for opt in OPTIONS},
        _settings={key: settings[key] for key in explicit},
        _derived=frozenset(derived),
    )


def _check_compaction(values: dict, shown, origin) -> None:
    """The compaction settings Java's GarbageCollectorThread refuses at start."""
    wait = values["gcWaitTime"]
    enabled = {}
    for kind in ("minor", "major"):
        interval, threshold = values[f"{kind}CompactionInterval"], values[f"{kind}CompactionThreshold"]
        enabled[kind] = interval > 0 and threshold > 0
        if enabled[kind] and interval * 1000 < wait:
            key = f"{kind}CompactionInterval"
            raise bad_value(key, shown(key), f"seconds is shorter than gcWaitTime ({wait} ms)", origin(key))
    if enabled["minor"] and enabled["major"]:
        for key, other in (
            ("minorCompactionInterval", "majorCompactionInterval"),
            ("minorCompactionThreshold", "majorCompactionThreshold"),
        ):
            if values[key] >= values[other]:
                raise bad_value(key, shown(key), f"is not below {other} ({shown(other)})", origin(key))


def startup_warnings(cfg: BookieConfig) -> list[str]:
    """What bookied warns about when it starts with ``cfg``: settings that
    weaken durability, and values it cannot honour."""
    out = []
    if not cfg.journal_sync_data:
        out.append(
            "journalSyncData=false: journal writes are NOT fsynced; adds are acknowledged once "
            "in the page cache, and a power failure or kernel crash can lose acknowledged entries"
        )
    if not cfg.journal_write_data:
        out.append(
            "journalWriteData=false: entries are NOT journaled; adds are acknowledged from the "
            f"write cache and are durable only after the next checkpoint (flushInterval "
            f"{cfg.flush_interval} ms): a crash loses acknowledged entries"
        )
    if not cfg.journal_adaptive_group_writes:
        out.append(
            "journalAdaptiveGroupWrites=false is not supported by bookied and has no effect: "
            "its journal writes and fsyncs each group in one step, so what arrives during an "
            "fsync always shares the next one"
        )
    return out
