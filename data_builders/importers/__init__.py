"""One module per released dataset, each a registered `@importer` (`python -m data_builders.convert`)."""
