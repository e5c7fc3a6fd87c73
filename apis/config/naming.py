"""Name checks from apimachinery's ``validation`` package, reduced to what scheduler config needs."""

from __future__ import annotations

import re

_QUALIFIED_NAME_MAX = 63
_DNS_SUBDOMAIN_MAX = 253
_NAME_PART = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")

_NAME_PART_MSG = (
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
    "with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
    "validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)
_PREFIX_MSG = (
    "prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, "
    "'-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex "
    "used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)


def qualified_name_errors(value: str) -> list[str]:
    """``validation.IsQualifiedName``: ``[prefix/]name`` as used by label keys and resource names.

    Returns apimachinery's messages; empty when the name is valid.
    """
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            return ["prefix part must be non-empty"]
        errors = []
        if len(prefix) > _DNS_SUBDOMAIN_MAX:
            errors.append(f"prefix part must be no more than {_DNS_SUBDOMAIN_MAX} characters")
        if not _DNS_SUBDOMAIN.match(prefix):
            errors.append(_PREFIX_MSG)
        if errors:
            return errors
    else:
        return [
            "a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start "
            "and end with an alphanumeric character with an optional DNS subdomain prefix and '/' "
            "(e.g. 'example.com/MyName')"
        ]
    if not name:
        return ["name part must be non-empty"]
    errors = []
    if len(name) > _QUALIFIED_NAME_MAX:
        errors.append(f"name part must be no more than {_QUALIFIED_NAME_MAX} characters")
    if not _NAME_PART.match(name):
        errors.append(_NAME_PART_MSG)
    return errors


def is_extended_resource_name(name: str) -> bool:
    """``v1helper.IsExtendedResourceName``: qualified, outside ``kubernetes.io/``, not ``requests.*``."""
    if "/" not in name or name.startswith("kubernetes.io/") or name.startswith("requests."):
        return False
    return not qualified_name_errors("requests." + name)
