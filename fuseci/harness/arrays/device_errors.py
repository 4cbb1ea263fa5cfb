"""The one error both device runtimes raise for fuseci's own allocations."""

from fuseci.errors import HarnessError


class DeviceMemoryError(HarnessError):
    """The device has no room for an allocation fuseci itself makes."""
