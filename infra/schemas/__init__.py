"""The project's own strict JSON schemas of the Kueue and JobSet fields it emits."""
