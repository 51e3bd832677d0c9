"""Record schema, dataset builders, importers, prompts and collation."""
