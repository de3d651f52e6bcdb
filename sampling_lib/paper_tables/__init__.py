"""Values printed in the papers' tables, one CSV file each (read with sampling_lib.testing.paper_table)."""
