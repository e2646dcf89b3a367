"""Fleet studies: a study's cells planned (and simulated where they fit) through `specsize.api`, on a local
process pool or a Ray cluster, into one Parquet table and an HTML summary. A shell over the API, like the CLI."""
