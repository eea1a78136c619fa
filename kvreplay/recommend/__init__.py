"""`kvreplay recommend` and `kvreplay deploy`: search the knobs the spec marks searchable, and turn a plan
into the launch arguments of a real engine.

Modules: space (the search space from the config), candidates (compile and replay one candidate),
ledger (the resumable JSONL ledger), pareto (SLA filter, objective, Pareto front), executors (process
pool or Ray), command (the `recommend` subcommand), deploy/ (the deployment generator).
"""
