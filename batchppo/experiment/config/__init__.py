"""Configs: presets, ``--set`` overrides and YAML, field types, the former fields of old run dirs,
what a resume may change, the starting recipes, and the start-up checks of a config's env."""
