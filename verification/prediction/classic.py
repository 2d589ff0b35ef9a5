"""The classic four-term load model (Compaq's SQL Server capacity-planning paper, 1997).

Loading a full backup restores the used data pages, then the used log pages, then re-initialises
the allocated-but-unused pages of each. A restore term runs at its slowest link (the source or the
volume it writes to); re-initialisation never touches the source. Sizes in GB, rates in GB/h, the
result in hours; see docs/prediction.md.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LoadTerm:
    name: str
    gigabytes: float
    rate_gb_per_hour: float
    bound: str  # which link set the rate: "source", "data volume", "log volume", "re-init"

    @property
    def hours(self) -> float:
        return self.gigabytes / self.rate_gb_per_hour


def classic_load_terms(*, db_used: float, log_used: float, db_allocated: float, log_allocated: float,
                       source_rate: float, data_volume_rate: float, log_volume_rate: float,
                       data_reinit_rate: float, log_reinit_rate: float) -> list[LoadTerm]:
    """The four terms, each with the rate and the link that bounds it."""
    for name, value in (("db_used", db_used), ("log_used", log_used)):
        if value < 0:
            raise ValueError(f"{name} must not be negative (got {value} GB)")
    if db_allocated < db_used or log_allocated < log_used:
        raise ValueError("allocated space must be at least the used space (GB)")
    rates = {"source_rate": source_rate, "data_volume_rate": data_volume_rate, "log_volume_rate": log_volume_rate,
             "data_reinit_rate": data_reinit_rate, "log_reinit_rate": log_reinit_rate}
    for name, rate in rates.items():
        if rate <= 0:
            raise ValueError(f"{name} must be positive (got {rate} GB/h)")
    data_rate, data_bound = min((source_rate, "source"), (data_volume_rate, "data volume"))
    log_rate, log_bound = min((source_rate, "source"), (log_volume_rate, "log volume"))
    return [
        LoadTerm("restore data pages", db_used, data_rate, data_bound),
        LoadTerm("restore log pages", log_used, log_rate, log_bound),
        LoadTerm("re-initialise unused data pages", db_allocated - db_used, data_reinit_rate, "re-init"),
        LoadTerm("re-initialise unused log pages", log_allocated - log_used, log_reinit_rate, "re-init"),
    ]


def classic_load_time(*, db_used: float, log_used: float, db_allocated: float, log_allocated: float,
                      source_rate: float, data_volume_rate: float, log_volume_rate: float,
                      data_reinit_rate: float, log_reinit_rate: float) -> float:
    """Hours to load a full database backup (sizes in GB, rates in GB/h)."""
    terms = classic_load_terms(db_used=db_used, log_used=log_used, db_allocated=db_allocated,
                               log_allocated=log_allocated, source_rate=source_rate,
                               data_volume_rate=data_volume_rate, log_volume_rate=log_volume_rate,
                               data_reinit_rate=data_reinit_rate, log_reinit_rate=log_reinit_rate)
    return sum(term.hours for term in terms)


def mb_per_second_to_gb_per_hour(rate: float) -> float:
    """GB/h = MB/s x 3.6 (decimal units, as the paper uses them)."""
    return rate * 3.6
