"""Where a role's defaults/main.yml and its meta/argument_specs.yml disagree (pure): the rule of
docs/development.md, "Defaults are written once"."""

from __future__ import annotations

from typing import Any

# A required option's placeholder in defaults/main.yml (the role refuses it with a message that
# names the variable): not a default.
PLACEHOLDERS = ("", 0, None)


def options(specs: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Every entry point's options, by name (an option of several entry points is one variable)."""
    found: dict[str, dict[str, Any]] = {}
    for entry in specs.values():
        for name, option in ((entry or {}).get("options") or {}).items():
            found.setdefault(name, option or {})
    return found


def templated(value: Any) -> bool:
    return "{{" in str(value) or "{%" in str(value)


def disagreements(defaults: dict[str, Any], specs: dict[str, Any]) -> list[str]:
    """One line per disagreement: a variable of defaults/main.yml the specs do not declare; a
    default of the specs that defaults/main.yml lacks or gives another value; a literal of
    defaults/main.yml the specs do not state as its default (a templated value is derived, so the
    specs describe it in words and give no default); a required option with a real default."""
    declared = options(specs)
    found = [f"{name}: in defaults/main.yml, not in meta/argument_specs.yml"
             for name in defaults if name not in declared]
    for name, option in declared.items():
        has_default, in_defaults = "default" in option, name in defaults
        value = defaults.get(name)
        if option.get("required"):
            if in_defaults and value not in PLACEHOLDERS:
                # Not the value: a required option is often a secret.
                found.append(f"{name}: required, yet defaults/main.yml gives it a value")
        elif has_default and not in_defaults:
            found.append(f"{name}: default {option['default']!r} in the specs only")
        elif has_default and templated(value):
            found.append(f"{name}: derived in defaults/main.yml ({value!r}), yet the specs give"
                         f" the default {option['default']!r}")
        elif has_default and value != option["default"]:
            found.append(f"{name}: default {option['default']!r} in the specs,"
                         f" {value!r} in defaults/main.yml")
        elif in_defaults and not has_default and value is not None and not templated(value):
            found.append(f"{name}: {value!r} in defaults/main.yml; state it as the specs' default")
    return found
