"""Reviewing a change: plan diffs, their reports, and the policy rules."""
