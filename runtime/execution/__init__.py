"""The driver side of the data plane: Spark session, epoch planning, the epoch loop."""
