"""Pictures of the workspace: `series` computes what is drawn from the spec (and the solver's
proven values), `render` draws it with matplotlib, `commands` is the `attnws plot` subcommand."""
