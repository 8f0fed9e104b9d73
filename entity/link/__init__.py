"""Entity linking stages (step 4 of the pipeline): the linkers, offline and remote, and their helper processes."""
