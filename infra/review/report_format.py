"""The formats of `tpuplane diff`: their own module, so the command line declares its options without loading
the report machinery (a `tpuplane catalog` must not pay for it)."""

from enum import Enum


class ReportFormat(str, Enum):
    MARKDOWN = "markdown"
    TEXT = "text"
    JSON = "json"
