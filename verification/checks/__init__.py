"""Data-level checks of a restored database, with Great Expectations 1.x.

What the user wrote (`suites`), what restoreproof makes by itself from the last passed verification
(`baseline`) and from the restore point (`freshness`) are all Great Expectations suites, validated
in one checkpoint per database (`runner`), whose results become checks of kind `data` (`results`).
Great Expectations is imported only here, and only when data checks run.
"""
