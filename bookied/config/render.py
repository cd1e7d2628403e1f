"""Writing a :class:`BookieConfig` back as bk_server.conf text."""

from __future__ import annotations

from .loading import BookieConfig
from .schema import OPTIONS, SECTIONS

__all__ = ["render_config"]


def render_config(cfg: BookieConfig, *, comments: bool = True, only_changed: bool = False) -> str:
    """A bk_server.conf that loads back into an equal configuration.

    Values filled in from a fallback are written commented out, so that the
    fallback still applies when the file is read again.  ``only_changed``
    leaves out options at their defaults; ``comments`` adds each option's
    meaning above it.
    """
    out = ["# Bookie configuration (bk_server.conf syntax), written by bookied."]
    for section, title in SECTIONS:
        block: list[str] = []
        for opt in OPTIONS:
            if opt.section != section:
                continue
            value = getattr(cfg, opt.attr)
            derived = cfg.is_derived(opt.name)
            if only_changed and (derived or value == opt.default):
                continue
            if comments:
                note = opt.meaning
                if opt.unit:
                    note += f" [{opt.unit}]"
                block.append(f"# {note}")
                if derived:
                    block.append(f"# (follows {opt.fallback or 'metadataServiceUri'} while unset)")
            if value is None or derived:
                block.append(f"#{opt.name}={opt.render(value)}")
            else:
                block.append(f"{opt.name}={opt.render(value)}")
            if comments:
                block.append("")
        if block:
            out.append("")
            out.append(f"## {title}")
            if comments:
                out.append("")
            out.extend(block)
    return "\n".join(out).rstrip("\n") + "\n"
