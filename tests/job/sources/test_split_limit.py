"""Read limits are shared across partitions in proportion to what each has pending."""

from job.sources.offsets import split_limit


def test_under_the_limit_reads_everything() -> None:
    end = {"t": {"0": 10, "1": 20}}
    assert split_limit({"t": {"0": 0, "1": 0}}, end, 100) == end


def test_limit_is_proportional_and_every_partition_moves() -> None:
    start = {"t": {"0": 0, "1": 0, "2": 5}}
    end = {"t": {"0": 1000, "1": 3000, "2": 6}}
    assert split_limit(start, end, 400) == {"t": {"0": 99, "1": 299, "2": 6}}
